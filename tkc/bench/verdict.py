"""One checked result of a sanitizer run (tkc.bench.sanitize's steps): printed
with ok or WRONG, and the WRONG ones counted for the exit status, so a tool
that perturbs timing cannot hide a wrong answer."""
wrong = 0


def report(name: str, err: float, tol: float) -> None:
    global wrong
    ok = err < tol
    wrong += not ok
    print(f"{name}: rel err {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
