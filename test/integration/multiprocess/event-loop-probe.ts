/**
 * Preloaded into a process under test (`node --import <this file, bundled> …`): measures how long its
 * event loop stalls, from SIGUSR2 on (the process' own start, which compiles modules synchronously, is not
 * what is measured), and writes `event-loop-probe max-stall-ms=<n> max-busy-stall-ms=<n>` to stderr when the
 * process exits. A stall is how late a 10 ms timer fires beyond its interval.
 *
 * A late timer has two causes: the main thread was busy (JavaScript, GC: what a blocking purge does), or
 * the process was not scheduled at all (a loaded machine: CI runs four test streams on two cores). Only
 * the first is the code's doing, so each stall is also counted as the main thread's own CPU time over it
 * (Linux: utime + stime of /proc/self/task/<pid>/stat, in clock ticks of 10 ms), never more than the stall:
 * `busy` is what the bound applies to. The libuv pool threads' unlinks are not the main thread's time.
 */
import fs from "node:fs";

const INTERVAL_MS = 10;
/** USER_HZ: the kernel's clock ticks per second in /proc stat files (100 on every Linux Node supports). */
const TICK_MS = 10;
const statPath = `/proc/self/task/${process.pid}/stat`;

/** The main thread's CPU time in ms, or null where /proc is not there (then a stall counts as busy). */
function mainThreadCpuMs(): number | null {
  try {
    const stat = fs.readFileSync(statPath, "utf8");
    // Fields after the command name (which may hold spaces, inside parentheses): state is field 3.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return null;
  }
}

let armed = false;
let maxStallMs = 0;
let maxBusyStallMs = 0;
let last = performance.now();
let lastCpu = mainThreadCpuMs();

function account(now: number): { stall: number; busy: number } {
  const stall = now - last - INTERVAL_MS;
  const cpu = mainThreadCpuMs();
  // One tick of slack: the counters move in 10 ms steps.
  const busy = cpu === null || lastCpu === null ? stall : Math.min(stall, cpu - lastCpu - TICK_MS);
  last = now;
  lastCpu = cpu;
  return { stall, busy };
}

const timer = setInterval(() => {
  const { stall, busy } = account(performance.now());
  if (!armed) return;
  maxStallMs = Math.max(maxStallMs, stall);
  maxBusyStallMs = Math.max(maxBusyStallMs, busy);
  // Each long one with when it ended, to match against the process' log when a bound fails.
  if (stall >= 100) {
    fs.writeSync(
      2,
      `event-loop-probe stall-ms=${Math.round(stall)} busy-ms=${Math.round(busy)} at=${new Date().toISOString()}\n`,
    );
  }
}, INTERVAL_MS);
timer.unref();

process.on("SIGUSR2", () => {
  armed = true;
  maxStallMs = 0;
  maxBusyStallMs = 0;
  last = performance.now();
  lastCpu = mainThreadCpuMs();
  fs.writeSync(2, "event-loop-probe armed\n");
});
process.on("exit", () => {
  if (!armed) return;
  // A stall that lasted until the exit itself counts too.
  const { stall, busy } = account(performance.now());
  maxStallMs = Math.max(maxStallMs, stall);
  maxBusyStallMs = Math.max(maxBusyStallMs, busy);
  fs.writeSync(
    2,
    `event-loop-probe max-stall-ms=${Math.round(maxStallMs)} max-busy-stall-ms=${Math.round(maxBusyStallMs)}\n`,
  );
});
