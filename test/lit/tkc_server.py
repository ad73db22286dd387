"""`tkc` for lit's RUN lines without a fresh interpreter each: a fork server.

Each `tkc` process spends ~0.35 s of CPU importing Python, MLIR and numpy
before it compiles anything (~0.1 s); lit's ~200 `tkc` RUN lines spent most
of its CPU there. lit.cfg.py starts this server once per lit run: it imports
tkc (and MLIR, numpy) and then, for each RUN line, forks a copy that runs
`tkc.cli.main(argv)` in the caller's folder, environment, stdin, stdout and
stderr (passed over a Unix socket), and exits with its status. The `tkc` the
RUN lines call is CLIENT below (`python3 -I -S`, a few ms), which falls back
to a plain `python3 -m tkc.cli` when the server is not there.

    tkc_server.py SOCKET   # serves until its parent (lit) exits
"""
import json
import os
import socket
import sys
import traceback

# The client: sends argv, folder and environment with its fds 0-2, then exits
# the way the forked tkc did (a status, or the same signal).
CLIENT = r'''#!{python} -IS
import json, os, signal, socket, sys
argv = sys.argv[1:]
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect({sock!r})
except OSError:  # no server (lit.cfg.py did not start one, or it is gone)
    os.execv({python!r}, [{python!r}, "-m", "tkc.cli"] + argv)
msg = json.dumps([argv, os.getcwd(), dict(os.environ)]).encode()
socket.send_fds(s, [len(msg).to_bytes(8, "little") + msg], [0, 1, 2])
reply = b""
while chunk := s.recv(64):
    reply += chunk
if not reply:
    sys.exit("tkc: lit's tkc_server.py sent no status")
status = int(reply)
if status < 0:  # killed by a signal: die of it too, as the process would have
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
    sys.exit(128 - status)
sys.exit(status)
'''


def _serve(path: str) -> None:
    lit = os.getppid()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)  # first: lit.cfg.py waits for the socket; requests queue
    listener.listen(64)
    server = os.getpid()
    try:
        import tkc.cli
        # What a compile imports, imported once here rather than in every fork.
        import mlir.ir  # noqa: F401
        import tkc.compiler  # noqa: F401
        import tkc.frontend  # noqa: F401
        import tkc.pass_pipeline  # noqa: F401
        import tkc.sass  # noqa: F401
        try:
            _warm()
        except Exception:  # noqa: BLE001  (a broken compile: the RUN lines report it)
            pass
        listener.settimeout(1.0)
        while os.getppid() == lit:
            _reap()
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            if os.fork() == 0:  # the reporter: runs tkc in a child, reports its status
                _forked(lambda: _report(conn, listener, tkc.cli.main))
            conn.close()
    finally:
        if os.getpid() == server:
            os.unlink(path)
            os.rmdir(os.path.dirname(path))


def _warm() -> None:
    """Compile one small pipelined kernel to PTX here, once: most of tkc's
    compile path (the lowering, MLIR's generated op classes, LLVM's NVPTX
    target) is imported or set up on first use, ~0.05-0.1 s of CPU that every
    fork would otherwise pay again for its RUN line."""
    import tkc
    from tkc import bf16, f32, gl, rt, st, tma, warpgroup
    from tkc.compiler import compile_to
    from tkc.ops import exp, row_max, store, sub_row, zero

    @tkc.kernel(warps=4, grid=lambda a, b, c: (c.c // 64, c.r // 64))
    def warm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "N", "K"), c: gl(f32, 1, 1, "M", "N")):
        x, y, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpid()
        a_s, b_s = st(bf16, 64, 64), st(bf16, 64, 64)
        acc = zero(rt(f32, 16, 64))
        for k in tkc.range(a.c // 64, stages=2):
            tma.load(a_s, a, (0, 0, y, k))
            tma.load(b_s, b, (0, 0, x, k))
            warpgroup.mma_ABt(acc, a_s, b_s)
            warpgroup.mma_async_wait(acc)
        store(c, exp(sub_row(acc, row_max(acc))), (0, 0, y * 4 + w, x))

    compile_to(warm.trace(), "ptx")


def _forked(body) -> None:
    """Run body() in a forked process and exit it with body's status: never
    back into the caller's code (the server's loop and its cleanup)."""
    status = 1
    try:
        status = body()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        os._exit(status)


def _report(conn, listener, main) -> int:
    listener.close()
    conn.settimeout(None)
    (argv, cwd, env), fds = _request(conn)
    pid = os.fork()
    if pid == 0:
        def run():
            conn.close()
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(env)
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
                os.close(fd)
            sys.argv = ["tkc"] + argv
            return _run(main, argv)
        _forked(run)
    for fd in fds:
        os.close(fd)
    _, wstatus = os.waitpid(pid, 0)
    status = -os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else os.WEXITSTATUS(wstatus)
    try:
        conn.sendall(str(status).encode())
    except OSError:  # the client is gone (lit killed it)
        pass
    return 0


def _reap() -> None:
    """Wait for the reporters that are done (their CPU then counts as ours)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _request(conn):
    """(argv, folder, environment) and the client's fds 0-2."""
    head, fds, _, _ = socket.recv_fds(conn, 8, 3)
    size, body = int.from_bytes(head, "little"), b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    return json.loads(body), fds


def _run(main, argv) -> int:
    """What `sys.exit(main())` would exit with, streams flushed."""
    try:
        status = main(argv)
    except SystemExit as e:  # argparse: --help, bad options
        status = e.code
    except BaseException:  # noqa: BLE001  (TKC_DEBUG=1 re-raises: print it as Python would)
        traceback.print_exc()
        status = 1
    if isinstance(status, str):
        sys.stderr.write(status + "\n")
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass
    return status or 0


if __name__ == "__main__":
    _serve(sys.argv[1])
