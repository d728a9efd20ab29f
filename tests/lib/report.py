"""Shared ending of the Python checks embedded in the test scripts: print one
line per check and the plain 'N passed, N failed' closing line, and give the
exit code (1 if anything failed)."""


def report(checks):
    failed = 0
    for what, ok in checks:
        print(("ok    " if ok else "FAIL  ") + what)
        failed += not ok
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0
