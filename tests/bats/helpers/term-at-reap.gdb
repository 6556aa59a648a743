# term-at-reap.gdb - attached to a bash process (gdb -p PID -x this), stops
# it when a blocking wait4() returns a child whose command line starts with
# $TERM_AT_REAP_CMD (default "sleep "), sends that bash SIGTERM before it
# runs on, then detaches.  The signal is then pending while bash returns
# from the syscall: its trap runs with the child reaped by the kernel but
# its exit status not yet recorded by bash, the window in which bash 5.2
# forgets the child (it stays "Running" in bash's job table for ever).
# Prints one line beginning "term-at-reap:" when it fired.
#
# wait4's registers on x86-64: rax is -ENOSYS (-38) at the syscall's entry
# and the reaped pid (or an error) at its return; rdx is the options
# argument, preserved across the call (0: a blocking wait, WNOHANG: 1).
set pagination off
set confirm off
handle SIGTERM nostop noprint pass
handle SIGCHLD nostop noprint pass
python
import os
import signal

term_at_reap_children = {}


def term_at_reap_scan(pid):
    found = {}
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, task)) as f:
            for child in f.read().split():
                try:
                    with open("/proc/%s/cmdline" % child) as c:
                        found[int(child)] = c.read().replace("\0", " ").strip()
                except OSError:
                    pass
    return found


class TermAtReap(gdb.Command):
    def __init__(self):
        super().__init__("term_at_reap", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        global term_at_reap_children
        target = gdb.selected_inferior().pid
        rax = int(gdb.parse_and_eval("(long)$rax"))
        rdx = int(gdb.parse_and_eval("(long)$rdx"))
        if rax == -38:
            # entry: the children it may reap (a reaped one leaves /proc)
            term_at_reap_children = term_at_reap_scan(target)
            gdb.execute("continue")
            return
        cmd = term_at_reap_children.get(rax, "")
        want = os.environ.get("TERM_AT_REAP_CMD", "sleep ")
        if rdx == 0 and cmd.startswith(want):
            print("term-at-reap: wait4 reaped %d (%s); SIGTERM to %d" % (rax, cmd, target), flush=True)
            os.kill(target, signal.SIGTERM)
            gdb.execute("detach")
            gdb.execute("quit")
        gdb.execute("continue")


TermAtReap()
end
catch syscall wait4
commands
silent
term_at_reap
end
continue
