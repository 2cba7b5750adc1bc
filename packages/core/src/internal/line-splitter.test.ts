import { describe, expect, it } from 'vitest';
import { createLineSplitter } from './line-splitter.ts';

describe('createLineSplitter', () => {
  it('yields whole lines across chunk boundaries, without CR or empty lines', () => {
    const lines: string[] = [];
    const splitter = createLineSplitter((line) => lines.push(line));
    splitter.write('first li');
    splitter.write('ne\r\n\nsecond\nthi');
    expect(lines).toEqual(['first line', 'second']);
    splitter.write('rd');
    splitter.end();
    expect(lines).toEqual(['first line', 'second', 'third']);
  });

  it('cuts an endless line at the bound and drops the rest of it, holding no more than the bound', () => {
    const lines: string[] = [];
    const splitter = createLineSplitter((line) => lines.push(line), 100);
    for (let chunk = 0; chunk < 10_000; chunk++) splitter.write('x'.repeat(1000));
    splitter.write('\nnext\n');
    expect(lines).toEqual([`${'x'.repeat(100)}…`, 'next']);
  });
});
