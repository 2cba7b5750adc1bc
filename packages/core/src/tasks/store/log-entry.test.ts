import { describe, expect, it } from 'vitest';
import { readLogEntry } from './log-entry.ts';
import { BoundedLog } from './task-log.ts';

describe('readLogEntry', () => {
  it('gives an entry read back from its JSON as it was written', () => {
    const log = new BoundedLog();
    log.append('tool-call', { step: 1, toolCallId: 'c1', toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } });
    log.append('task-end', { status: 'completed' });
    for (const entry of log.read().entries) {
      const read = readLogEntry(JSON.parse(JSON.stringify(entry)));
      expect(JSON.stringify(read)).toBe(JSON.stringify(entry));
    }
  });

  it('keeps an entry of a type it does not know, or whose data is not an object, as an unknown entry', () => {
    const time = '2026-01-01T00:00:00.000Z';
    expect(readLogEntry({ seq: 1, time, type: 'note', data: { text: 'hi' } })).toEqual({
      seq: 1,
      time,
      type: 'unknown-entry',
      data: { storedType: 'note', storedData: { text: 'hi' } },
    });
    expect(readLogEntry({ seq: 2, time, type: 'step-start', data: null })).toEqual({
      seq: 2,
      time,
      type: 'unknown-entry',
      data: { storedType: 'step-start', storedData: null },
    });
  });
});
