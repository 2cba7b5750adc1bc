import { deserializeMessage, type JSONRPCMessage } from '@modelcontextprotocol/client';
import { OversizedScan, replaceOversized, type MessageLimit, type OversizedMessage } from './message-limit.ts';

/**
 * Cuts a stdio server's output into its newline-delimited messages, each at most `maxMessageBytes`. It
 * takes the place of the SDK's `ReadBuffer` inside `StdioClientTransport`, which concatenates its whole
 * buffer with each chunk read (quadratic in a message's size) and, past its limit, throws, which closes
 * the transport and loses the session.
 *
 * A frame is kept as the chunks it came in and joined once, at its newline. One that passes the limit is
 * not kept: its bytes are counted and skipped to its newline (only its first and last bytes are kept), so
 * the stream stays in step, and it is replaced by an error answer to the request it answered
 * (`replaceOversized`). A notification over the limit is dropped and told to `limit.onDropped`.
 * Internal to the session pool.
 */
export class StdioFrameReader {
  readonly #limit: MessageLimit;
  readonly #pending: () => readonly (string | number)[];
  #parts: Buffer[] = [];
  #size = 0;
  #skipping: OversizedScan | undefined;
  /** Whole frames, and frames over the limit, in the order they ended. */
  #ready: (Buffer | OversizedMessage)[] = [];

  /** `pending`: the ids of the requests sent and not yet answered, to tell which one a frame over the limit answered. */
  constructor(limit: MessageLimit, pending: () => readonly (string | number)[]) {
    this.#limit = limit;
    this.#pending = pending;
  }

  append(chunk: Buffer): void {
    for (let start = 0; start < chunk.length;) {
      const newline = chunk.indexOf(10, start);
      const end = newline === -1 ? chunk.length : newline;
      if (end > start) this.#take(chunk.subarray(start, end));
      if (newline === -1) return;
      this.#endFrame();
      start = newline + 1;
    }
  }

  /** The next message, or `null` when no whole one is buffered. @throws what `deserializeMessage` or `replaceOversized` throws. */
  readMessage(): JSONRPCMessage | null {
    for (let next = this.#ready.shift(); next !== undefined; next = this.#ready.shift()) {
      if (!Buffer.isBuffer(next)) {
        const answer = replaceOversized(next, this.#limit, this.#pending());
        if (answer === undefined) continue;
        return answer;
      }
      const end = next.at(-1) === 13 ? next.length - 1 : next.length;
      return deserializeMessage(next.toString('utf8', 0, end));
    }
    return null;
  }

  clear(): void {
    this.#parts = [];
    this.#size = 0;
    this.#skipping = undefined;
    this.#ready = [];
  }

  #take(part: Buffer): void {
    if (this.#skipping !== undefined) {
      this.#skipping.add(part);
      return;
    }
    if (this.#size + part.length <= this.#limit.maxMessageBytes) {
      this.#parts.push(part);
      this.#size += part.length;
      return;
    }
    this.#skipping = new OversizedScan();
    for (const kept of this.#parts) this.#skipping.add(kept);
    this.#skipping.add(part);
    this.#parts = [];
    this.#size = 0;
  }

  #endFrame(): void {
    if (this.#skipping !== undefined) {
      this.#ready.push(this.#skipping.end(true));
      this.#skipping = undefined;
    } else if (this.#size > 0) {
      this.#ready.push(this.#parts.length === 1 ? (this.#parts[0] as Buffer) : Buffer.concat(this.#parts, this.#size));
      this.#parts = [];
      this.#size = 0;
    }
  }
}
