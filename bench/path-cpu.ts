// `node --conditions=klym-source bench/path-cpu.ts [--requests 2000] [--rounds 3] [--against <checkout>] [--paths a,b] [--profile]`:
// the serving thread's CPU for one request on the start and status paths (issue #42 item 2), from the
// kernel's per-thread accounting (`/proc/<pid>/task/<pid>/schedstat`), one request at a time on scenario
// 5's server after a warm-up: `start_async_agent_task` and `check_task_status` over MCP Streamable HTTP,
// `POST /api/tasks` and `GET /api/tasks/:id`, and MCP `ping` (the floor every MCP request pays). A start's
// figure holds the serving thread's part of its task's run (the runner's messages), not the runner's.
// With `--against`, another checkout's server runs in alternating rounds. With `--profile`, the server
// runs under `--cpu-prof` and each path's profile is summed for the measured requests only: the serving
// thread's busy samples by owner (Klym, the MCP SDK, Hono, zod, Node, GC) and its top frames. Linux only.
import { readFileSync, readdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { threadCpu } from './proc-cpu.ts';
import { client, scenarioFiveOptions, startKlymChild, waitUntilIdle } from './klym-server.ts';
import { startFakeGrynyaProcess, type ChildServer } from './servers.ts';
import { summarize } from './stats.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    against: { type: 'string' },
    paths: { type: 'string', default: 'mcp-start,rest-start,mcp-status,rest-status,mcp-ping' },
    profile: { type: 'boolean', default: false },
  },
});
const requests = Number(values.requests);
const here = path.resolve(import.meta.dirname, '..');
const trees: Record<string, string> = { ...(values.against === undefined ? {} : { before: path.resolve(values.against) }), now: here };
const paths = values.paths.split(',');

/** Microseconds on the clock V8's profiles use (CLOCK_MONOTONIC), as `process.hrtime` reads it. */
const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

async function measure(grynya: ChildServer, root: string, which: string): Promise<{ cpuUs: number; wallMs: number; window?: [number, number]; dir?: string }> {
  const dir = values.profile ? mkdtempSync(path.join(tmpdir(), `klym-prof-${which}-`)) : undefined;
  if (dir !== undefined) Object.assign(process.env, { KLYM_BENCH_PROFILE: '1', KLYM_BENCH_PROFILE_DIR: dir });
  const options = scenarioFiveOptions(grynya, 50);
  // The status paths read one task for minutes: it must outlive scenario 5's 3 s TTL.
  const klym = await startKlymChild(which.endsWith('status') ? { ...options, tasks: { ...options.tasks, ttlMs: 3_600_000 } } : options, root);
  delete process.env.KLYM_BENCH_PROFILE;
  const mcp = await client(klym.mcpUrl);
  const json = { 'content-type': 'application/json' };
  const startArgs = { prompt: 'self-check' };
  let taskId = '';
  const asks: Record<string, () => Promise<unknown>> = {
    'mcp-start': () => mcp.callTool({ name: 'start_async_agent_task', arguments: startArgs }),
    'rest-start': () => fetch(`${klym.url}/api/tasks`, { method: 'POST', headers: json, body: JSON.stringify(startArgs) }).then((r) => r.json()),
    'mcp-status': () => mcp.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }),
    'rest-status': () => fetch(`${klym.url}/api/tasks/${taskId}`).then((r) => r.json()),
    'mcp-ping': () => mcp.ping(),
  };
  const ask = asks[which];
  if (ask === undefined) throw new Error(`Expected --paths from ${Object.keys(asks).join(', ')}, got "${which}"`);
  try {
    const started = await mcp.callTool({ name: 'start_async_agent_task', arguments: startArgs });
    taskId = String((started.structuredContent as { task_id?: unknown }).task_id);
    for (let warm = 0; warm < 300; warm++) await ask();
    await waitUntilIdle(klym);
    const times: number[] = [];
    const before = threadCpu(klym.pid).get(klym.pid) ?? 0;
    const from = monotonicUs();
    for (let index = 0; index < requests; index++) {
      const began = performance.now();
      const answer = (await ask()) as { isError?: boolean };
      if (answer.isError === true) throw new Error(`${which} failed: ${JSON.stringify(answer)}`);
      times.push(performance.now() - began);
    }
    // Before waiting for the last tasks: that wait's `stats` (the store's counts, memory) is the bench's, not a request's.
    const to = monotonicUs();
    const cpuUs = ((threadCpu(klym.pid).get(klym.pid) ?? 0) - before) / 1e3 / requests;
    await waitUntilIdle(klym);
    return { cpuUs, wallMs: summarize(times).median, window: [from, to], ...(dir === undefined ? {} : { dir }) };
  } finally {
    await mcp.close();
    await klym.stop();
  }
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** Who owns a frame, from its script's URL; '' for a native or builtin frame (its caller's owner). */
/** Microseconds a thread's owners were busy in all. */
const busy = (owners: [string, number][]): number => owners.reduce((sum, [, us]) => sum + us, 0);

function owner(url: string, name: string): string {
  if (name === '(garbage collector)') return 'GC';
  if (name === '(program)') return 'V8 (program)';
  if (url === '') return '';
  if (url.startsWith('node:')) return 'Node';
  const module = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (module === undefined) return url.includes('/packages/') || url.includes('/apps/') ? 'Klym' : url.includes('/bench/') ? 'bench' : 'other';
  if (module.startsWith('@modelcontextprotocol/')) return 'MCP SDK';
  if (module === 'hono' || module.startsWith('@hono/')) return 'Hono';
  return module;
}

const perRequest = (entries: Map<string, number>): [string, number][] =>
  [...entries].map(([key, us]) => [key, us / requests] as [string, number]).toSorted((a, b) => b[1] - a[1]);

/** A thread's busy samples within `window`, by owner and by top self frame (µs per request). */
function readProfile(dir: string, window: [number, number], file: string): { byOwner: [string, number][]; top: [string, number][] } {
  const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as {
    nodes: ProfileNode[];
    startTime: number;
    samples: number[];
    timeDeltas: number[];
  };
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const ownerOf = (id: number): string => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = nodes.get(at)?.callFrame;
      const who = frame === undefined ? '' : owner(frame.url, frame.functionName);
      if (who !== '') return who;
    }
    return 'Node';
  };
  const byOwner = new Map<string, number>();
  const top = new Map<string, number>();
  let time = profile.startTime;
  for (let index = 0; index < profile.samples.length; index++) {
    const delta = profile.timeDeltas[index] ?? 0;
    time += delta;
    const id = profile.samples[index] ?? 0;
    const frame = nodes.get(id)?.callFrame;
    if (time < window[0] || time > window[1] || frame === undefined || frame.functionName === '(idle)') continue;
    const who = ownerOf(id);
    byOwner.set(who, (byOwner.get(who) ?? 0) + delta);
    const where = `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?/, '').replace(/^.*\/(packages|apps)\//, '$1/')}:${frame.lineNumber + 1} [${who}]`;
    top.set(where, (top.get(where) ?? 0) + delta);
  }
  return { byOwner: perRequest(byOwner), top: perRequest(top).slice(0, 25) };
}

const grynya = await startFakeGrynyaProcess();
const results: Record<string, Record<string, { cpuUs: number[]; wallMs: number[] }>> = {};
try {
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const which of paths) {
      for (const name of round % 2 === 0 ? Object.keys(trees) : Object.keys(trees).toReversed()) {
        const sample = await measure(grynya, trees[name] as string, which);
        const into = ((results[which] ??= {})[name] ??= { cpuUs: [], wallMs: [] });
        into.cpuUs.push(sample.cpuUs);
        into.wallMs.push(sample.wallMs);
        console.log(`round ${round + 1} ${which} ${name}: serving thread ${sample.cpuUs.toFixed(0)} µs/request, wall p50 ${sample.wallMs.toFixed(2)} ms`);
        if (sample.dir !== undefined && sample.window !== undefined) {
          // One profile a thread, `CPU.<date>.<pid>.<thread id>.<n>.cpuprofile`: 0 is the serving thread, the busiest other the runner.
          const files = readdirSync(sample.dir).filter((file) => file.endsWith('.cpuprofile'));
          const threads = files.map((file) => ({
            main: /\.0\.\d+\.cpuprofile$/.test(file),
            ...readProfile(sample.dir as string, sample.window as [number, number], file),
          }));
          const runner = threads.filter((thread) => !thread.main).toSorted((a, b) => busy(b.byOwner) - busy(a.byOwner))[0];
          for (const thread of [threads.find((each) => each.main), runner]) {
            if (thread === undefined) continue;
            const total = busy(thread.byOwner);
            const owners = thread.byOwner.map(([who, us]) => `${who} ${us.toFixed(0)} (${((us / total) * 100).toFixed(0)}%)`).join(', ');
            console.log(`  ${thread.main ? 'serving' : 'runner'} thread's profile, busy ${total.toFixed(0)} µs/request: ${owners}`);
            for (const [where, us] of thread.top.slice(0, thread.main ? 25 : 12)) console.log(`    ${us.toFixed(1).padStart(6)} µs  ${where}`);
          }
        }
      }
    }
  }
} finally {
  await grynya.stop();
}
console.log(`\nServing thread's CPU per request, median of ${values.rounds} rounds × ${requests} requests (µs; wall p50 in ms, the machine shared):\n`);
console.log(`| path | ${Object.keys(trees).join(' | ')} |`);
console.log(
  `| --- | ${Object.keys(trees)
    .map(() => '---')
    .join(' | ')} |`,
);
for (const [which, byTree] of Object.entries(results)) {
  const cells = Object.keys(trees).map((name) => {
    const sample = byTree[name];
    return sample === undefined
      ? ''
      : `${summarize(sample.cpuUs).median.toFixed(0)} µs (${sample.cpuUs.map((us) => us.toFixed(0)).join(', ')}); ${summarize(sample.wallMs).median.toFixed(2)} ms`;
  });
  console.log(`| ${which} | ${cells.join(' | ')} |`);
}
