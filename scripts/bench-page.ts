// `pnpm bench:page <bench-output.txt> [--partial] [--commit <sha>] [--page <file.md>]`: writes the figures of one
// `pnpm bench` run into docs/benchmarks.md, between `<!-- figures:begin -->` and `<!-- figures:end -->`, and
// nothing else of the page: the run's date, commit and machine, then one table per scenario heading the run
// printed, each `figure <name> <value>` line a row with its target and, where the target is a plain bound,
// met or missed. Every figure bench/*.ts can print is in the block once: those the run did not print are
// listed last, without a value, so a figure cannot be left off the page.
// It refuses (exit 1) an output with a figure printed twice, with no figures, or from a run with `--only` or
// `--quick` unless `--partial` is given; the block then says which scenarios it holds.
//   pnpm bench > /tmp/bench.txt 2>&1 && pnpm bench:page /tmp/bench.txt
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const root = path.join(import.meta.dirname, '..');
const BEGIN = '<!-- figures:begin -->';
const END = '<!-- figures:end -->';

/** A target: a bound on the figure (`of`: a multiple of another figure of the same run), or words only. */
type Target = { readonly bound: '≤' | '≥' | '='; readonly value: string; readonly of?: string; readonly note?: string } | string;

const atMost = (value: string, note?: string): Target => ({ bound: '≤', value, ...(note === undefined ? {} : { note }) });
const atLeast = (value: string): Target => ({ bound: '≥', value });
const exactly = (value: string, note?: string): Target => ({ bound: '=', value, ...(note === undefined ? {} : { note }) });

/** Each figure's target, as the issues that asked for it state it (docs/benchmarks.md says which, per scenario). */
export const TARGETS: Readonly<Record<string, Target>> = {
  pooled_ratio_sse: atMost('1.10'),
  pooled_ratio_streamable_http: atMost('1.10'),
  pooled_ratio_stdio: atMost('1.10'),
  pooled_ratio_stateless_2026: atMost('1.10'),
  fresh_vs_pooled_ratio: 'about 5 expected on loopback',
  store_calls_over_5ms: exactly('0', 'no event-loop stall over 5 ms caused by the store'),
  start_p99_ms: atMost('10'),
  start_ping_ratio_p50: atMost('1.3'),
  start_ping_ratio_p99: atMost('1.3'),
  a2a_send_vs_start_ratio_p50: atMost('1.3'),
  throughput_ratio: atLeast('0.80'),
  loop_delay_p99_saturated_ms: atMost('20'),
  status_p99_saturated_ms: atMost('20', 'issue #12; #42 sets it against the floor'),
  status_p99_saturated_starting_ms: { bound: '≤', value: '1.5', of: 'floor_p99_saturated_starting_ms' },
  status_p99_load70_ms: atMost('10'),
  heap_retained_mib_per_1000_tasks: atMost('20'),
  cold_start_ms: atMost('1500'),
  store_server_start_p99_ratio: atMost('1.2'),
  scale_ratio_2_workers: atLeast('1.8'),
  scale_ratio_4_workers: atLeast('3.2'),
  takeover_default_ms: atMost('60000', '60 s'),
  heavy_answer_exact: exactly('1', 'exact'),
  graph_answer_exact: exactly('1', 'exact'),
  heavy_max_request_ratio: atMost('0.95'),
  heavy_query_tokens_ratio: atMost('0.01'),
  graph_query_tokens_ratio: atMost('0.01'),
  heavy_map_tokens_ratio: atMost('1.3'),
  graph_map_tokens_ratio: atMost('1.3'),
  map_budget_overshoot: exactly('0'),
  heavy_map_wall_ratio: atMost('1.25'),
  heavy_query_ms_per_mb: atMost('50'),
  graph_query_ms_per_mb: atMost('50'),
  heavy_rss_mib_per_mb: atMost('3'),
  graph_rss_mib_per_mb: atMost('3'),
  query_bomb_rss_mib: atMost('64'),
  heavy_grep_ms_per_mb: atMost('20'),
  fair_wait_ratio: atMost('1.5'),
  fair_wait_ratio_redis: atMost('1.5'),
  deep_answer_exact: exactly('1', 'exact'),
  deep_tokens_ratio: atMost('0.1'),
  code_host_call_ms_p50: atMost('1'),
};

/**
 * The names of figures bench/*.ts builds from something other than a string literal, keyed by file and argument:
 * a new one must be listed here, or `figureNames` throws.
 */
const DERIVED: Readonly<Record<string, readonly string[]>> = {
  "failure-figures.ts: `inflight_fail_ms_${kind.replace('-', '_')}`": ['inflight_fail_ms_sse', 'inflight_fail_ms_streamable_http'],
  "failure-figures.ts: `recovery_ms_${kind.replace('-', '_')}`": ['recovery_ms_sse', 'recovery_ms_streamable_http'],
  'fairness.ts: `fair_wait_ratio${key}`': ['fair_wait_ratio', 'fair_wait_ratio_redis'],
  'fairness.ts: `fifo_wait_ratio${key}`': ['fifo_wait_ratio', 'fifo_wait_ratio_redis'],
  'pool-overhead.ts: `pooled_ratio_${benchCase.key}`': [
    'pooled_ratio_sse',
    'pooled_ratio_streamable_http',
    'pooled_ratio_stdio',
    'pooled_ratio_stateless_2026',
  ],
  'pool-overhead.ts: `pooled_ratio_${benchCase.key}_default_fetch`': [
    'pooled_ratio_sse_default_fetch',
    'pooled_ratio_streamable_http_default_fetch',
    'pooled_ratio_stateless_2026_default_fetch',
  ],
  'scale-out-takeover.ts: name': ['takeover_ms', 'takeover_default_ms'],
};

/** Every figure name bench/*.ts can print (its `figure(…)` calls), in file order; throws on a name it cannot read. */
export function figureNames(benchDir = path.join(root, 'bench')): string[] {
  const names: string[] = [];
  for (const file of readdirSync(benchDir)
    .filter((name) => name.endsWith('.ts'))
    .toSorted()) {
    const source = readFileSync(path.join(benchDir, file), 'utf8');
    for (const [, argument] of source.matchAll(/\bfigure\(\s*('[^']*'|`[^`]*`|[A-Za-z_$][\w$.]*)/g)) {
      const literal = /^'([a-z0-9_]+)'$/.exec(argument as string);
      const derived = DERIVED[`${file}: ${argument}`];
      if (literal !== null) names.push(literal[1] as string);
      else if (derived !== undefined) names.push(...derived);
      else throw new Error(`bench/${file} prints a figure named by ${argument}: list its names in DERIVED in scripts/bench-page.ts`);
    }
  }
  return [...new Set(names)];
}

/** One scenario heading of a run and the figures printed under it, in order. */
export interface Section {
  readonly heading: string;
  readonly figures: (readonly [name: string, value: string])[];
}

/** What `bench/run.ts` printed, as far as the page needs it. */
export interface BenchRun {
  readonly date: string;
  readonly commit: string | undefined;
  readonly machine: string;
  /** `--only <names>` and `--quick`, as the machine line records them. */
  readonly partialBy: readonly string[];
  readonly loadAtEnd: string | undefined;
  readonly sections: readonly Section[];
}

/** Reads one `pnpm bench` output; throws, naming what is wrong, on one the page cannot hold. */
export function parseBenchOutput(text: string): BenchRun {
  const lines = text.split(/\r?\n/);
  const headerAt = lines.findIndex((line) => line.startsWith('# Klym benchmarks — '));
  if (headerAt === -1) throw new Error('no "# Klym benchmarks — <date>" header: is it the output of `pnpm bench`?');
  const [, date = '', commit] = /^# Klym benchmarks — (\S+?)(?:, commit (.+))?$/.exec(lines[headerAt] as string) ?? [];
  const machine = lines.slice(headerAt + 1).find((line) => line.trim() !== '') ?? '';
  const partialBy = [/\((--only [^)]+)\)/.exec(machine)?.[1], /\((--quick)\)/.test(machine) ? '--quick' : undefined].filter((flag) => flag !== undefined);
  const sections: { heading: string; figures: [string, string][] }[] = [];
  const printedIn = new Map<string, string[]>();
  let scenario = '';
  let loadAtEnd: string | undefined;
  for (const line of lines.slice(headerAt + 1)) {
    const heading = /^(#{2,3}) (.+)$/.exec(line);
    if (heading !== null) {
      const title = (heading[2] as string).trim();
      if (heading[1] === '##') scenario = title;
      sections.push({ heading: heading[1] === '##' ? title : `${scenario} — ${title}`, figures: [] });
      continue;
    }
    const figure = /^figure (\S+) (\S+)$/.exec(line.trim());
    if (figure !== null) {
      const [, name = '', value = ''] = figure;
      if (sections.length === 0) sections.push({ heading: '(before any scenario heading)', figures: [] });
      const section = sections.at(-1) as (typeof sections)[number];
      section.figures.push([name, value]);
      printedIn.set(name, [...(printedIn.get(name) ?? []), section.heading]);
      continue;
    }
    loadAtEnd = /^load average at the end: (.+)$/.exec(line.trim())?.[1] ?? loadAtEnd;
  }
  const twice = [...printedIn].filter(([, headings]) => headings.length > 1);
  if (twice.length > 0)
    throw new Error(
      `a figure printed more than once: ${twice.map(([name, headings]) => `${name} (under ${headings.map((heading) => `"${heading}"`).join(' and ')})`).join('; ')}`,
    );
  if (printedIn.size === 0) throw new Error('no "figure <name> <value>" lines: the run printed no figures (did it fail?)');
  return { date, commit, machine: machine.trim(), partialBy, loadAtEnd, sections: sections.filter((section) => section.figures.length > 0) };
}

/** `≤ 1.10: met`, `≥ 0.80: missed`, or the target's words; `''` without one. */
export function targetCell(name: string, value: string, figures: ReadonlyMap<string, string>): string {
  const target = TARGETS[name];
  if (target === undefined) return '';
  if (typeof target === 'string') return target;
  const text = `${target.bound} ${target.value}${target.of === undefined ? '' : `× \`${target.of}\``}${target.note === undefined ? '' : ` (${target.note})`}`;
  const measured = Number(value);
  const reference = target.of === undefined ? 1 : Number(figures.get(target.of));
  if (!Number.isFinite(measured) || !Number.isFinite(reference)) return `${text}: not measured`;
  const bound = Number(target.value) * reference;
  const met = target.bound === '≤' ? measured <= bound : target.bound === '≥' ? measured >= bound : measured === bound;
  return `${text}: ${met ? 'met' : 'missed'}${target.of === undefined ? '' : ` (${(measured / reference).toFixed(2)}×)`}`;
}

const table = (rows: readonly string[]): string[] => ['| figure | value | target |', '| --- | ---: | --- |', ...rows];

/** The block between the markers (the markers included) for one run: a `###` heading and a table per scenario heading. */
export function renderBlock(run: BenchRun, options: { readonly commit: string; readonly known: readonly string[] }): string {
  const figures = new Map(run.sections.flatMap((section) => section.figures));
  const when = run.date.replace('T', ' ').replace(/:\d\d(\.\d+)?Z$/, ' UTC');
  const scenarios = [...new Set(run.sections.map((section) => section.heading.split(' — ')[0]))];
  const missing = options.known.filter((name) => !figures.has(name));
  const out = [
    BEGIN,
    '<!-- Written by `pnpm bench:page <output>` (scripts/bench-page.ts) from one `pnpm bench` run: not by hand. -->',
    '',
    `The run of ${when}, commit ${options.commit}: ${run.machine}${run.loadAtEnd === undefined ? '' : `; load average at the end: ${run.loadAtEnd}`}.`,
    ...(/load average/.test(run.machine) ? [] : ['(This output predates the load average in its header: not recorded.)']),
  ];
  if (run.partialBy.length > 0)
    out.push(
      '',
      `**A partial run (\`${run.partialBy.join('`, `')}\`).** It holds ${scenarios.map((scenario) => `“${scenario}”`).join(', ')} only; every other figure is listed last, not measured in this run.`,
    );
  for (const section of run.sections) {
    out.push(
      '',
      `### ${section.heading}`,
      ...table(section.figures.map(([name, value]) => `| \`${name}\` | ${value} | ${targetCell(name, value, figures)} |`)),
    );
  }
  if (missing.length > 0)
    out.push(
      '',
      '### Not in this run',
      ...table(missing.map((name) => `| \`${name}\` | — | ${targetCell(name, 'NaN', figures).replace(/: not measured$/, '')} |`)),
    );
  out.push(END);
  return out.join('\n');
}

/** The page with its block replaced; throws unless it has exactly one begin marker before one end marker. */
export function replaceBlock(page: string, block: string): string {
  const begin = page.indexOf(BEGIN);
  const end = page.indexOf(END);
  if (begin === -1 || end < begin || page.indexOf(BEGIN, begin + 1) !== -1 || page.indexOf(END, end + 1) !== -1)
    throw new Error(`the page needs one "${BEGIN}" line before one "${END}" line`);
  return page.slice(0, begin) + block + page.slice(end + END.length);
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { partial: { type: 'boolean', default: false }, commit: { type: 'string' }, page: { type: 'string' } },
  });
  const [output] = positionals;
  if (output === undefined || positionals.length > 1)
    throw new Error('Expected one argument, the output of `pnpm bench` (e.g. `pnpm bench > /tmp/bench.txt 2>&1`)');
  const run = parseBenchOutput(readFileSync(output, 'utf8'));
  if (run.partialBy.length > 0 && !values.partial)
    throw new Error(`${output} is from a run with ${run.partialBy.join(' and ')}: not the whole scripted run; pass --partial to write it anyway`);
  const commit =
    values.commit ??
    run.commit ??
    `${execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim()} (the page's checkout: the run did not record one)`;
  const page = path.resolve(values.page ?? path.join(root, 'docs/benchmarks.md'));
  const known = figureNames();
  writeFileSync(page, replaceBlock(readFileSync(page, 'utf8'), renderBlock(run, { commit, known })));
  const printed = run.sections.reduce((sum, section) => sum + section.figures.length, 0);
  const missing = known.filter((name) => !run.sections.some((section) => section.figures.some(([printedName]) => printedName === name)));
  console.log(
    `${path.relative(process.cwd(), page)}: the figures of ${run.date}, ${printed} in ${run.sections.length} tables; ${missing.length} not in this run`,
  );
}

if (import.meta.main) {
  try {
    main();
  } catch (error) {
    console.error(`bench-page: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
