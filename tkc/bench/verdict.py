"""A sanitizer run's results (tkc.bench.sanitize's steps): each printed with ok
or WRONG, and the WRONG ones counted for the exit status, so a tool that
perturbs timing cannot hide a wrong answer; and `picked`, which runs the ops
with a schedule other than the tuned pick."""
import contextlib

wrong = 0


def report(name: str, err: float, tol: float) -> None:
    global wrong
    ok = err < tol
    wrong += not ok
    print(f"{name}: rel err {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)


@contextlib.contextmanager
def picked(space, config):
    """Inside: every op runs `config` where the autotuned `space` would
    choose (the plans made anew); after it, the tables' picks again."""
    from tkc.torchops import plans
    space.choose = lambda key, args=None: config
    plans.forget()
    try:
        yield
    finally:
        del space.choose   # the method again
        plans.forget()
