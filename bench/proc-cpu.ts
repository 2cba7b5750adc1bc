// CPU a process has used, from the kernel's per-thread accounting (/proc/<pid>/task/<tid>/schedstat:
// nanoseconds on a CPU), which a busy machine slows but does not inflate the way it does wall-clock time.
// Linux only: elsewhere the figures are NaN.
import { readFileSync, readdirSync } from 'node:fs';

/** CPU nanoseconds by thread id, and each thread's name (`comm`: `V8Worker` for V8's GC and compiler helpers). */
export function threadCpu(pid: number, names?: Map<number, string>): Map<number, number> {
  const cpu = new Map<number, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return cpu;
  }
  for (const tid of tids) {
    try {
      cpu.set(Number(tid), Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]));
      names?.set(Number(tid), readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim());
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return cpu;
}

/** Milliseconds of CPU the process `pid` has used so far, all its threads together; NaN where /proc is not. */
export function processCpuMs(pid: number | undefined): number {
  const cpu = pid === undefined ? new Map<number, number>() : threadCpu(pid);
  return cpu.size === 0 ? Number.NaN : [...cpu.values()].reduce((total, ns) => total + ns, 0) / 1e6;
}
