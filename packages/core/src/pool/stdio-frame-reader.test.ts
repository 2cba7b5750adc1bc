import { describe, expect, it } from 'vitest';
import { MESSAGE_TOO_LARGE_CODE, readEnds, type OversizedMessage } from './message-limit.ts';
import { StdioFrameReader } from './stdio-frame-reader.ts';

const LIMIT = 200;

function reader(pending: (string | number)[] = []) {
  const dropped: OversizedMessage[] = [];
  const frames = new StdioFrameReader({ maxMessageBytes: LIMIT, onDropped: (message) => dropped.push(message) }, () => pending);
  const read = (): unknown[] => {
    const messages: unknown[] = [];
    for (let message = frames.readMessage(); message !== null; message = frames.readMessage()) messages.push(message);
    return messages;
  };
  return { frames, dropped, read };
}

/** Feeds `text` in chunks of `size` bytes, as a pipe would. */
function feed(frames: StdioFrameReader, text: string, size: number): void {
  const bytes = Buffer.from(text);
  for (let start = 0; start < bytes.length; start += size) frames.append(bytes.subarray(start, start + size));
}

const answer = (id: number, text: string): string => `${JSON.stringify({ result: { content: [{ type: 'text', text }] }, jsonrpc: '2.0', id })}\n`;

describe('StdioFrameReader', () => {
  it('joins frames split across chunks of any size, with LF or CRLF, up to the limit itself', () => {
    const exact = answer(3, '');
    const atLimit = answer(3, 'x'.repeat(LIMIT - exact.length + 1));
    expect(Buffer.byteLength(atLimit) - 1).toBe(LIMIT);
    for (const size of [1, 7, 64, 4096]) {
      const { frames, read } = reader();
      feed(frames, `${answer(1, 'привіт')}${answer(2, 'two').replace('\n', '\r\n')}${atLimit}`, size);
      expect(read()).toEqual([1, 2, 3].map((id) => expect.objectContaining({ id })));
    }
  });

  it('decodes characters of 2, 3 and 4 bytes cut between chunks, and a stray byte as U+FFFD', () => {
    const text = 'é€😀'.repeat(5);
    for (const size of [1, 2, 3, 5]) {
      const { frames, read } = reader();
      feed(frames, answer(1, text), size);
      expect(read()).toEqual([expect.objectContaining({ result: { content: [{ type: 'text', text }] } })]);
    }
    const { frames, read } = reader();
    const bytes = Buffer.from(answer(2, 'ab'));
    const at = bytes.indexOf('ab');
    frames.append(Buffer.concat([bytes.subarray(0, at), Buffer.from([0xe2, 0x82]), bytes.subarray(at)]));
    expect(read()).toEqual([expect.objectContaining({ result: { content: [{ type: 'text', text: '\ufffdab' }] } })]);
  });

  it('replaces an answer over the limit by an error answer to its request, and reads on in step', () => {
    for (const size of [5, 64, 100_000]) {
      const { frames, read } = reader();
      feed(frames, `${answer(7, 'y'.repeat(50_000))}${answer(8, 'after')}`, size);
      const [tooLarge, after] = read() as [{ id: number; error: { code: number; data: unknown } }, { id: number; result: unknown }];
      expect(tooLarge).toMatchObject({
        id: 7,
        error: {
          code: MESSAGE_TOO_LARGE_CODE,
          data: { klymMessageTooLarge: { bytes: Buffer.byteLength(answer(7, 'y'.repeat(50_000))) - 1, complete: true, limit: LIMIT } },
        },
      });
      expect(after).toMatchObject({ id: 8, result: { content: [{ text: 'after' }] } });
    }
  });

  it('drops a notification over the limit and tells it; an answer whose id cannot be read answers the one pending request', () => {
    const { frames, dropped, read } = reader([42]);
    const notification = `${JSON.stringify({ method: 'notifications/message', params: { level: 'info', data: 'z'.repeat(1_000) }, jsonrpc: '2.0' })}\n`;
    const withoutId = `{"result":{"content":[{"type":"text","text":"${'w'.repeat(1_000)}"}]},"id":42,"extra":{"a":1}}\n`;
    feed(frames, notification + withoutId, 300);
    expect(read()).toEqual([expect.objectContaining({ id: 42, error: expect.objectContaining({ code: MESSAGE_TOO_LARGE_CODE }) })]);
    expect(dropped).toEqual([expect.objectContaining({ bytes: Buffer.byteLength(notification) - 1, complete: true })]);
  });

  it('refuses to guess when an answer’s id cannot be read and no single request is pending', () => {
    const { frames } = reader([]);
    feed(frames, `{"result":{"text":"${'w'.repeat(1_000)}"},"id":1,"extra":[1]}\n`, 64);
    expect(() => frames.readMessage()).toThrow(/over its limit of 200 bytes .*could not be told/);
  });
});

describe('readEnds', () => {
  it.each([
    ['the TypeScript SDK: id last', { head: '{"result":{"content":[', tail: '"}]},"jsonrpc":"2.0","id":12}' }, { answer: true, id: 12 }],
    ['pydantic: id first', { head: '{"jsonrpc":"2.0","id":"abc","result":{"content"', tail: 'x"}]}}' }, { answer: true, id: 'abc' }],
    ['an error answer', { head: '{"jsonrpc":"2.0","id":5,"error":{"code":1', tail: '"}}' }, { answer: true, id: 5 }],
    ['a notification', { head: '{"method":"notifications/message","params":{', tail: '}},"jsonrpc":"2.0"}' }, { answer: false }],
    ['a nested id is not the answer’s', { head: '{"result":{"a":', tail: ',"id":5}}' }, { answer: true, id: undefined }],
    ['an id inside a string', { head: '{"result":{"text":"', tail: String.raw`,\"id\":5}"}}` }, { answer: true, id: undefined }],
  ])('%s', (_name, ends, expected) => {
    expect(readEnds(ends)).toEqual(expected);
  });
});
