"""Process helpers shared by the sandbox and cheating tests."""


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a reaped-or-dead process counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False
