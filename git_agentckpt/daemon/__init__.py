"""The per-worktree daemon of `git ckpt`, kept apart from the commands it runs.

Like git's `fsmonitor--daemon`, a long-lived helper owned by one work tree:

- `find`: where a call's daemon is (no pygit2, no click: the entry point reads it first);
- `client`: the protocol's client side (the entry point, `git ckpt daemon`, the barrier);
- `server`: the daemon's loop; `child`: what a forked child does to become the caller;
  `claim`: the lock that makes one daemon per work tree; `conn`: one connection;
- `peer`: which callers are the daemon's twin (served) and which are not;
- `watcher` and `watch`: the work-tree watcher and its plug-in; `barrier`: how a
  child asks for the watcher's view (a cookie file), never trusting its own copy;
- `warm`: the read-ahead of the cache files between calls;
- `registry`: this user's daemons, and the cap on how many run.
"""
