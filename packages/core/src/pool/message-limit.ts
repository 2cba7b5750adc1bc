import { ProtocolError, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/client';
import { KlymError } from '../errors.ts';
import type { ResolvedUpstreamConfig } from './upstream-config.ts';
import type { UpstreamLogEntry } from './upstream-session.ts';

/**
 * The JSON-RPC error code of the answer Klym puts in place of an upstream's answer over `maxMessageBytes`
 * (in the range JSON-RPC leaves to implementations). The SDK rejects the one request it answers, and
 * {@link messageTooLargeError} turns that into `UPSTREAM_MESSAGE_TOO_LARGE`.
 */
export const MESSAGE_TOO_LARGE_CODE = -32_090;

/** Bytes kept of each end of a message over the limit: where its `id` and its kind are. */
export const END_BYTES = 512;

/** What Klym knew of a message over the limit when it dropped it. */
export interface OversizedMessage {
  /** Its size in bytes, or the bytes read before it was dropped when `complete` is false. */
  readonly bytes: number;
  /** Whether `bytes` is its whole size (a stdio frame, an SSE event skipped to its end). */
  readonly complete: boolean;
  /** Its first and last bytes, as text. */
  readonly head: string;
  readonly tail: string;
}

/**
 * Reads a message that passed the limit without keeping it: counts its bytes and keeps its first and last
 * {@link END_BYTES}, which hold its `id` and tell an answer from a notification.
 */
export class OversizedScan {
  #bytes = 0;
  readonly #head = Buffer.alloc(END_BYTES);
  #headLength = 0;
  /** The last bytes, in a ring written at `#tailAt`. */
  readonly #tail = Buffer.alloc(END_BYTES);
  #tailAt = 0;
  #tailFull = false;

  /** The message's next bytes. */
  add(part: Uint8Array): void {
    this.addHead(part);
    this.addTail(part);
    this.count(part.length);
  }

  /** Bytes of the message's start, in order (counted apart, with `count`). */
  addHead(part: Uint8Array): void {
    if (this.#headLength >= END_BYTES) return;
    const taken = Math.min(END_BYTES - this.#headLength, part.length);
    this.#head.set(part.subarray(0, taken), this.#headLength);
    this.#headLength += taken;
  }

  /** Bytes of the message so far, in order, the last of them its latest (counted apart, with `count`). */
  addTail(part: Uint8Array): void {
    const last = part.length > END_BYTES ? part.subarray(part.length - END_BYTES) : part;
    const first = Math.min(last.length, END_BYTES - this.#tailAt);
    this.#tail.set(last.subarray(0, first), this.#tailAt);
    this.#tail.set(last.subarray(first), 0);
    const at = this.#tailAt + last.length;
    if (at >= END_BYTES) this.#tailFull = true;
    this.#tailAt = at % END_BYTES;
  }

  count(bytes: number): void {
    this.#bytes += bytes;
  }

  get bytes(): number {
    return this.#bytes;
  }

  end(complete: boolean): OversizedMessage {
    const tail = this.#tailFull
      ? Buffer.concat([this.#tail.subarray(this.#tailAt), this.#tail.subarray(0, this.#tailAt)])
      : this.#tail.subarray(0, this.#tailAt);
    return { bytes: this.#bytes, complete, head: this.#head.toString('utf8', 0, this.#headLength), tail: tail.toString('utf8') };
  }
}

/** A JSON scalar without escapes (the values of `jsonrpc` and `id`): a string, a number, `null`. */
const SCALAR = String.raw`"[^"\\]*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null`;
const LEADING_MEMBER = new RegExp(String.raw`^\s*"([^"\\]+)"\s*:\s*(${SCALAR}|[{[])`);
const TRAILING_MEMBER = new RegExp(String.raw`,\s*"([^"\\]+)"\s*:\s*(${SCALAR})\s*$`);

/**
 * What a message's ends say it is, read from its top-level members before its first object and after its
 * last: an answer (`result` or `error`) with its `id` when one of the ends holds it, or something else (a
 * notification, a request). Serializers put `id` at one end — the TypeScript SDK last, Python's pydantic
 * before `result` — and no member of a nested object can pass for a top-level one at either end.
 */
export function readEnds(
  json: Pick<OversizedMessage, 'head' | 'tail'>,
): { readonly answer: false } | { readonly answer: true; readonly id: RequestId | undefined } {
  const members = new Map<string, string>();
  let rest = json.head.replace(/^\s*\{/, '');
  let first: string | undefined;
  for (let match = LEADING_MEMBER.exec(rest); match !== null; match = LEADING_MEMBER.exec(rest)) {
    const [whole, key = '', value = ''] = match;
    if (value === '{' || value === '[') {
      first = key;
      break;
    }
    members.set(key, value);
    rest = rest.slice(whole.length).replace(/^\s*,/, '');
  }
  if (members.has('method') || (first !== 'result' && first !== 'error')) return { answer: false };
  let end = json.tail.replace(/\}\s*$/, '');
  for (let match = TRAILING_MEMBER.exec(end); match !== null; match = TRAILING_MEMBER.exec(end)) {
    members.set(match[1] ?? '', match[2] ?? '');
    end = end.slice(0, match.index);
  }
  const id = members.get('id');
  if (id === undefined || id === 'null') return { answer: true, id: undefined };
  const parsed = JSON.parse(id) as unknown;
  return { answer: true, id: typeof parsed === 'string' || typeof parsed === 'number' ? parsed : undefined };
}

/** Details of the answer Klym put in place of one over the limit, carried in its error's `data`. */
interface TooLargeDetails {
  readonly bytes: number;
  readonly complete: boolean;
  readonly limit: number;
}

/** The JSON-RPC error answer to request `id` that takes the place of an answer over `limit`. */
export function tooLargeAnswer(id: RequestId, message: Pick<OversizedMessage, 'bytes' | 'complete'>, limit: number): JSONRPCMessage {
  const data: TooLargeDetails = { bytes: message.bytes, complete: message.complete, limit };
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: MESSAGE_TOO_LARGE_CODE,
      message: `The answer was ${describeSize(data)}, over the limit of ${limit} bytes`,
      data: { klymMessageTooLarge: data },
    },
  };
}

/**
 * The `UPSTREAM_MESSAGE_TOO_LARGE` error of a request whose answer Klym dropped for its size, or
 * `undefined` when `error` is not that.
 */
export function messageTooLargeError(error: unknown, upstream: string, toolName: string): KlymError | undefined {
  if (!(error instanceof ProtocolError) || error.code !== MESSAGE_TOO_LARGE_CODE) return undefined;
  const details = (error.data as { klymMessageTooLarge?: TooLargeDetails } | undefined)?.klymMessageTooLarge;
  if (details === undefined) return undefined;
  const message =
    `Upstream "${upstream}" answered ${toolName} with ${describeSize(details)}, over its limit of ${details.limit} bytes (${mebibytes(details.limit)}); ` +
    `the answer was dropped and the session goes on. Ask for less (a range, a page, head or tail), or raise upstreams.${upstream}.maxMessageBytes`;
  return new KlymError('UPSTREAM_MESSAGE_TOO_LARGE', message, { upstream, toolName, cause: error });
}

/** Whether `error` is the answer Klym put in place of one over the limit: the session is still sound. */
export function isMessageTooLarge(error: unknown): boolean {
  return error instanceof ProtocolError && error.code === MESSAGE_TOO_LARGE_CODE;
}

/** A message's size as the errors and logs say it: "a message of (more than) N bytes (X MiB)". */
export function describeSize({ bytes, complete }: Pick<OversizedMessage, 'bytes' | 'complete'>): string {
  return `${complete ? 'a message of' : 'a message of more than'} ${bytes} bytes (${mebibytes(bytes)})`;
}

function mebibytes(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MiB`;
}

/** An upstream's limit on the messages it sends, and where a dropped message that answered nothing is told. */
export interface MessageLimit {
  readonly maxMessageBytes: number;
  /** A message over the limit that answered no request (a notification, a request of the upstream's) was dropped. */
  readonly onDropped: (message: OversizedMessage) => void;
}

/** An upstream's {@link MessageLimit}: a message dropped is told to `log` as a warning naming the key that raises the limit. */
export function messageLimit(config: Pick<ResolvedUpstreamConfig, 'name' | 'maxMessageBytes'>, log: (entry: UpstreamLogEntry) => void): MessageLimit {
  const { name, maxMessageBytes } = config;
  return {
    maxMessageBytes,
    onDropped: (message) =>
      log({
        upstream: name,
        source: 'notification',
        level: 'warning',
        message: `Upstream "${name}" sent ${describeSize(message)} that answered no request, over its limit of ${maxMessageBytes} bytes (upstreams.${name}.maxMessageBytes): it was dropped`,
      }),
  };
}

/**
 * What takes the place of a message over the limit: the error answer to the request it answered (its `id`
 * read from its ends, else the one request `pending` when there is exactly one), or nothing when it
 * answered no request (`limit.onDropped` is told).
 * @throws {Error} when it answered a request that cannot be told: the stream has lost an answer.
 */
export function replaceOversized(message: OversizedMessage, limit: MessageLimit, pending: readonly RequestId[] = []): JSONRPCMessage | undefined {
  const ends = readEnds(message);
  if (!ends.answer) {
    limit.onDropped(message);
    return undefined;
  }
  const id = ends.id ?? (pending.length === 1 ? pending[0] : undefined);
  if (id !== undefined) return tooLargeAnswer(id, message, limit.maxMessageBytes);
  throw new Error(
    `it answered with ${describeSize(message)}, over its limit of ${limit.maxMessageBytes} bytes (maxMessageBytes), and the request it answered could not be told`,
  );
}
