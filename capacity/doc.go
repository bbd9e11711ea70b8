// Package capacity finds the highest constant send rate a target carries
// within an SLO, and what each message costs in CPU at every rate tried.
//
// The search is open-loop (loadgen.Run as a library, one run per step):
//
//  1. the generator's own ceiling is measured first, against an in-process
//     no-op endpoint over the same transport (loadgen.MeasureCeiling);
//  2. ramp: From, then ×Growth each step, until a step breaks the SLO or
//     To holds;
//  3. bisect between the highest rate that held and the lowest that broke
//     until they are within Resolution of each other (or MaxSteps);
//  4. repeat: the highest rate that held is run once more; only a rate
//     that held twice is the sustainable rate. A repeat that breaks steps
//     down by Resolution until a rate holds, and repeats that one (within
//     MaxSteps; running out of steps is noted, and without a rate held
//     twice the answer says that none was confirmed, not that none held).
//
// A step is a fresh population (its own uid range) sending at one rate
// for WarmUp + Step. Only sends whose intended time falls in the measured
// window [WarmUp, WarmUp+Step) count: their outcomes and their ACK
// latency from the intended time (no coordinated omission) are read back
// from the step's ledger, so the step's p50/p99 are exact, not averages
// of per-second figures. A step holds the SLO when every SLO term was
// measured and within its limit and the checker's verdict on the step's
// ledger is valid: a figure that was not measured (no ACK, no lag poll
// answered) is unknown, and unknown does not hold. Nor does a step whose
// latency grew through the window (the second half's ACK p50 more than
// twice the first half's and beyond a quarter of the ACK limit): a queue
// that grows is not a sustainable rate, however short the step. Nor does
// a step in which some consumer group fell behind (GET /v1/lab/lag: its
// lag age grew through the window by more than a quarter of the window
// and 2 s): the ACK path held but the pipeline behind it did not keep up.
// Steps are independent: before each step after the first the search
// waits, at most SettleMax (30 s), for every group's lag to fall to
// SettleLag (2 s); a backlog still there is recorded on the step
// (backlog_at_start_s) and said on its line.
//
// Bounded time: each step runs under a deadline (WarmUp + Step + Settle +
// DrainTimeout + a margin) and is stopped early, from loadgen's per-second
// rows of the measured window (never for the warm-up), when the SLO is
// clearly broken (three seconds in a row with the
// ACK p99 beyond three times its limit, errors beyond ten times theirs
// (at least 5%), or sends started and none ACKed: a stalled server).
//
// Whose limit: a broken step is put down to the generator when the
// offered rate reached 90% of the generator's measured ceiling, or when
// sends started late (the pacer's send delay p99 beyond half the ACK
// limit, or sends it never started) while the server answered in time
// (service time, actual send to ACK, within the limit); otherwise to the
// server.
//
// Cost: at the window's start and end it reads utime+stime of every
// watched process from /proc/PID/stat (the generator itself always, and
// the pids or process names it is given: mariadbd, redis-server, the
// reference server's processes; of a name, those that descend from a
// watched process where there are, else every match marked found by name)
// and divides the CPU time by the ACKed
// sends of the same seconds, and by the inbox rows they made (rows per
// message from the checker's witness pulls). The figures describe one
// shared machine: every process competes for the same cores.
//
// The package talks to the target only through the contract (loadgen,
// GET /v1/lab/lag); it must not import ref/... or scenarios, and it reads
// /proc only for the pids it was given or found by name.
package capacity
