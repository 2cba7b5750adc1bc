import type { RequestId } from '@modelcontextprotocol/client';
import { END_BYTES, OversizedScan, replaceOversized, type MessageLimit, type OversizedMessage } from './message-limit.ts';

/**
 * The event type that ends what the SDK's parser holds of an event over the limit: neither transport
 * listens for it (they read `message` events, and legacy SSE its `endpoint`), so the parser drops it.
 */
const DROPPED_EVENT = 'klym-dropped';

/**
 * Passes an SSE stream on as it comes, each event held to `limit.maxMessageBytes` (its field lines and the
 * blank line that ends it). Once an event passes the limit, the rest of it is not passed on but counted and
 * skipped to its end (its first and last bytes kept); what the SDK's parser already holds of it is ended as
 * an event of a type nobody listens for, and after it goes an event carrying the error answer to the
 * request it answered (`replaceOversized`; `pending`: the requests of the POST whose answer this stream is),
 * or nothing when it answered none. An answer whose request cannot be told errors the stream, which breaks
 * its session. Lines end in LF or CRLF (what MCP servers write); a lone CR is not a line end here.
 *
 * Events are passed on as they come rather than held to their end: holding a 48 MiB answer's chunks
 * doubled its time through the pool and added its size to the peak memory.
 */
export function limitSseEvents(limit: MessageLimit, pending: () => readonly RequestId[]): TransformStream<Uint8Array, Uint8Array> {
  /** Bytes of the event under way passed on, and views of its first and its latest ones (no copies). */
  let size = 0;
  let headParts: Uint8Array[] = [];
  let headBytes = 0;
  let tailParts: Uint8Array[] = [];
  let tailBytes = 0;
  let skipping: OversizedScan | undefined;
  /** Bytes of the line under way, and the last byte read (a CR before the LF of an empty line). */
  let lineBytes = 0;
  let lastByte = -1;
  /** The last byte passed on: whether the parser is at the start of a line. */
  let lastPassed = 10;

  const pass = (part: Uint8Array, controller: TransformStreamDefaultController<Uint8Array>): void => {
    controller.enqueue(part);
    size += part.length;
    lastPassed = part.at(-1) as number;
    if (headBytes < END_BYTES) {
      headParts.push(part);
      headBytes += part.length;
    }
    tailParts.push(part);
    tailBytes += part.length;
    while (tailBytes - (tailParts[0] as Uint8Array).length >= END_BYTES) tailBytes -= (tailParts.shift() as Uint8Array).length;
  };
  const take = (part: Uint8Array, controller: TransformStreamDefaultController<Uint8Array>): void => {
    if (part.length === 0) return;
    if (skipping !== undefined) skipping.add(part);
    else if (size + part.length <= limit.maxMessageBytes) pass(part, controller);
    else {
      skipping = new OversizedScan();
      for (const passed of headParts) skipping.addHead(passed);
      for (const passed of tailParts) skipping.addTail(passed);
      skipping.count(size);
      skipping.add(part);
      if (size > 0) controller.enqueue(Buffer.from(`${lastPassed === 10 ? '' : '\n'}event: ${DROPPED_EVENT}\n\n`));
    }
  };
  const endEvent = (controller: TransformStreamDefaultController<Uint8Array>): void => {
    if (skipping !== undefined) {
      const answer = replaceOversized(eventData(skipping.end(true)), limit, pending());
      if (answer !== undefined) controller.enqueue(Buffer.from(`event: message\ndata: ${JSON.stringify(answer)}\n\n`));
    }
    size = 0;
    headParts = [];
    headBytes = 0;
    tailParts = [];
    tailBytes = 0;
    skipping = undefined;
  };

  return new TransformStream({
    transform(chunk, controller) {
      const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      let start = 0;
      for (let position = 0; ;) {
        const newline = bytes.indexOf(10, position);
        if (newline === -1) {
          if (position < bytes.length) {
            lineBytes += bytes.length - position;
            lastByte = bytes[bytes.length - 1] as number;
          }
          take(bytes.subarray(start), controller);
          return;
        }
        const length = lineBytes + newline - position;
        const before = newline > position ? bytes[newline - 1] : lastByte;
        lineBytes = 0;
        lastByte = 10;
        position = newline + 1;
        if (length === 0 || (length === 1 && before === 13)) {
          take(bytes.subarray(start, position), controller);
          start = position;
          endEvent(controller);
        }
      }
    },
  });
}

/** The JSON of an event's `data:` field, at its ends: what tells which request it answered. */
function eventData(event: OversizedMessage): OversizedMessage {
  return { ...event, head: event.head.replace(/^[\s\S]*?(?:^|\n)data: ?/, ''), tail: event.tail.trimEnd() };
}
