import { describe, expect, it } from 'vitest';
import { createLineSplitter } from './line-splitter.ts';

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

describe('createLineSplitter', () => {
  it('yields whole lines across chunk boundaries, without CR or empty lines', () => {
    const lines: string[] = [];
    const splitter = createLineSplitter((line) => lines.push(line));
    splitter.write(bytes('first li'));
    splitter.write(bytes('ne\r\n\nsecond\nthi'));
    expect(lines).toEqual(['first line', 'second']);
    splitter.write(bytes('rd'));
    splitter.end();
    expect(lines).toEqual(['first line', 'second', 'third']);
  });

  it('cuts an endless line at the bound, drops the rest of it and counts what it dropped', () => {
    const lines: string[] = [];
    const counts = { bytes: 0, lines: 0, droppedBytes: 0 };
    const splitter = createLineSplitter((line) => lines.push(line), { maxLineBytes: 100, counts });
    for (let chunk = 0; chunk < 10_000; chunk++) splitter.write(bytes('x'.repeat(1000)));
    splitter.write(bytes('\nnext\n'));
    expect(lines).toEqual([`${'x'.repeat(100)}…`, 'next']);
    expect(counts).toEqual({ bytes: 10_000_006, lines: 2, droppedBytes: 10_000_000 - 100 });
  });

  it('keeps a character whole where it cuts, and a character split across chunks', () => {
    const lines: string[] = [];
    const splitter = createLineSplitter((line) => lines.push(line), { maxLineBytes: 4 });
    splitter.write(bytes('ab€cd\n'));
    const euro = bytes('€\n');
    splitter.write(euro.subarray(0, 1));
    splitter.write(euro.subarray(1));
    expect(lines).toEqual(['ab…', '€']);
  });
});
