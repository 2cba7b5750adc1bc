// scripts/bench-page.ts writes one `pnpm bench` run's figures into docs/benchmarks.md. Here the script runs as
// users run it: a process, given a small output written below and a page of its own. The committed page must
// hold every figure bench/*.ts can print, once.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { figureNames } from '../scripts/bench-page.ts';

const root = path.resolve(import.meta.dirname, '..');
const dir = mkdtempSync(path.join(tmpdir(), 'bench-page-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PAGE = '# Benchmarks\n\nHow to run.\n\n<!-- figures:begin -->\nold figures\n<!-- figures:end -->\n\n## 1. A scenario\n\nWhat it measures.\n';

/** A run's output as bench/run.ts prints it, with a warning among the lines as real runs have. */
const output = (machineFlags: string, figures: string): string =>
  [
    '> klym@ bench /work/main',
    '# Klym benchmarks — 2026-11-28T13:05:09.000Z, commit 1a2b3c4',
    `Node v24.21.0, 2 × Intel(R) Xeon(R) Processor, 24 GiB${machineFlags}; load average at the start: 3.10, 2.50, 2.00`,
    '',
    '## 1. Pool overhead per call: pooled callTool vs raw SDK Client.callTool on an open session',
    '',
    '| transport | … |',
    '(node:1) Warning: something',
    figures,
    '',
    '## The Klym server',
    '',
    '### 5. Throughput, event-loop delay and memory',
    'figure throughput_ratio 0.36',
    'figure status_p99_saturated_starting_ms 21.71',
    'figure floor_p99_saturated_starting_ms 7.18',
    'figure cpu_ms_per_task 5.22',
    '',
    'load average at the end: 4.00, 3.00, 2.10',
  ].join('\n');

/** Runs the script on `text` against a fresh copy of PAGE; the page as it is after. */
function benchPage(text: string, ...flags: string[]): { status: number | null; stdout: string; stderr: string; page: string } {
  const file = path.join(dir, `out-${Math.random().toString(36).slice(2)}.txt`);
  const page = `${file}.md`;
  writeFileSync(file, text);
  writeFileSync(page, PAGE);
  const result = spawnSync(process.execPath, ['--conditions=klym-source', path.join(root, 'scripts/bench-page.ts'), file, '--page', page, ...flags], {
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, page: readFileSync(page, 'utf8') };
}

/** The block's rows: figure name → its value and target cells. */
function rows(page: string): Map<string, string[]> {
  const block = /<!-- figures:begin -->([\s\S]*)<!-- figures:end -->/.exec(page)?.[1] ?? '';
  const found = new Map<string, string[]>();
  for (const [, name, value, target] of block.matchAll(/^\| `([a-z0-9_]+)` \| ([^|]*) \| ([^|]*) \|$/gm)) {
    expect(found.has(name as string), `${name} has two rows`).toBe(false);
    found.set(name as string, [(value as string).trim(), (target as string).trim()]);
  }
  return found;
}

describe('pnpm bench:page', () => {
  it('writes one row per figure, with its target and met or missed, and the run’s date, commit, machine and load', () => {
    const result = benchPage(output('', 'figure pooled_ratio_sse 1.05\nfigure pooled_ratio_stdio 1.32\nfigure fresh_vs_pooled_ratio 9.67'));
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const found = rows(result.page);
    expect(found.get('pooled_ratio_sse')).toEqual(['1.05', '≤ 1.10: met']);
    expect(found.get('pooled_ratio_stdio')).toEqual(['1.32', '≤ 1.10: missed']);
    expect(found.get('throughput_ratio')).toEqual(['0.36', '≥ 0.80: missed']);
    // A bound on another figure of the same run: 21.71 ÷ 7.18 = 3.02× the floor.
    expect(found.get('status_p99_saturated_starting_ms')).toEqual(['21.71', '≤ 1.5× `floor_p99_saturated_starting_ms`: missed (3.02×)']);
    expect(found.get('fresh_vs_pooled_ratio')).toEqual(['9.67', 'about 5 expected on loopback']);
    expect(found.get('cpu_ms_per_task')).toEqual(['5.22', '']);
    // What bench/*.ts can print and this run did not: listed, without a value.
    expect(found.get('scale_ratio_4_workers')).toEqual(['—', '≥ 3.2']);
    expect(result.page).toContain('The run of 2026-11-28 13:05 UTC, commit 1a2b3c4: Node v24.21.0, 2 × Intel(R) Xeon(R) Processor, 24 GiB');
    expect(result.page).toContain('load average at the start: 3.10, 2.50, 2.00; load average at the end: 4.00, 3.00, 2.10');
    // One table per scenario heading, the server's under its sub-heading.
    expect(result.page).toContain('\n### The Klym server — 5. Throughput, event-loop delay and memory\n| figure | value | target |\n');
    // Only the block is rewritten.
    expect(result.page).not.toContain('old figures');
    expect(result.page.startsWith('# Benchmarks\n\nHow to run.\n\n<!-- figures:begin -->')).toBe(true);
    expect(result.page.endsWith('<!-- figures:end -->\n\n## 1. A scenario\n\nWhat it measures.\n')).toBe(true);
  });

  it('refuses a figure printed twice, naming it and where, and leaves the page as it was', () => {
    const result = benchPage(output('', 'figure pooled_ratio_sse 1.05\nfigure throughput_ratio 0.40'));
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('a figure printed more than once: throughput_ratio');
    expect(result.stderr).toContain('"1. Pool overhead per call');
    expect(result.page).toBe(PAGE);
  });

  it('refuses an `--only` run unless told --partial, and then says which scenarios the block holds', () => {
    const only = output(' (--only pool-overhead,server)', 'figure pooled_ratio_sse 1.05');
    const refused = benchPage(only);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/from a run with --only pool-overhead,server: .*pass --partial/);
    expect(refused.page).toBe(PAGE);

    const partial = benchPage(only, '--partial');
    expect(partial.status).toBe(0);
    expect(partial.page).toContain('**A partial run (`--only pool-overhead,server`).** It holds “1. Pool overhead per call');
    expect(partial.page).toContain('“The Klym server” only');
  });

  it('refuses an output without figures, and a `--quick` run without --partial', () => {
    const none = benchPage(output('', '').replaceAll(/^figure .*$/gm, ''));
    expect(none.status).toBe(1);
    expect(none.stderr).toContain('no "figure <name> <value>" lines');
    const quick = benchPage(output(' (--quick)', 'figure pooled_ratio_sse 1.05'));
    expect(quick.status).toBe(1);
    expect(quick.stderr).toContain('from a run with --quick');
  });
});

describe('docs/benchmarks.md', () => {
  it('holds every figure bench/*.ts can print exactly once, in its generated block', () => {
    const names = figureNames();
    // The scan reads literal names and the derived ones scripts/bench-page.ts lists; a few it must find:
    expect(names).toEqual(expect.arrayContaining(['throughput_ratio', 'pooled_ratio_stdio', 'fair_wait_ratio_redis', 'takeover_default_ms']));
    expect(names.length).toBeGreaterThan(80);
    const page = readFileSync(path.join(root, 'docs/benchmarks.md'), 'utf8');
    const found = rows(page);
    expect(names.filter((name) => !found.has(name))).toEqual([]);
    expect([...found.keys()].filter((name) => !names.includes(name))).toEqual([]);
  });
});
