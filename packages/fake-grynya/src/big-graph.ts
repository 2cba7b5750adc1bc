import { pythonJsonString } from './python-json.ts';

/** The services events come from, the busiest first. */
export const EVENT_SERVICES = ['svc-gateway', 'svc-auth', 'svc-orders', 'svc-catalog', 'svc-search', 'svc-billing', 'svc-notify'] as const;
/** Event severities, from least to most severe. */
export const EVENT_SEVERITIES = ['debug', 'info', 'warn', 'error', 'fatal'] as const;

export type EventService = (typeof EVENT_SERVICES)[number];
export type EventSeverity = (typeof EVENT_SEVERITIES)[number];

/** One Event node of the big graph, its properties in the order `query_graph` writes them. */
export interface BigGraphEvent {
  /** `ev-000042`: the event's index, zero-padded to six digits. */
  readonly id: string;
  readonly label: 'Event';
  readonly service: EventService;
  readonly severity: EventSeverity;
  /** `YYYY-MM-DD`, one of the six weeks from 2026-10-05 to 2026-11-15. */
  readonly day: string;
  /** `tr-` and 16 lowercase hex digits, unique among the events of one seed. */
  readonly trace_id: string;
  /** From 2 to about 130 characters; about one in six holds non-ASCII characters (some astral: surrogate pairs). */
  readonly message: string;
}

/** A row of `MATCH (e:Event) RETURN e`, as `query_graph` answers it. */
export interface EventRow {
  readonly e: BigGraphEvent;
}

/**
 * The most events a big graph holds: its answer is one string, and V8 refuses strings past about 512 MiB
 * (2^29 − 24 characters); a million events make about 180 MB.
 */
export const MAX_EVENTS = 1_000_000;

/** Share of each service among the events, in {@link EVENT_SERVICES}' order, in percent. */
const SERVICE_WEIGHTS = [24, 18, 16, 14, 12, 10, 6];
/** Share of each severity per service, in {@link EVENT_SEVERITIES}' order, in percent: billing and orders fail most, notify least. */
const SEVERITY_WEIGHTS: Record<EventService, readonly number[]> = {
  'svc-gateway': [22, 54, 15, 8, 1],
  'svc-auth': [20, 58, 15, 6, 1],
  'svc-orders': [18, 53, 17, 10, 2],
  'svc-catalog': [25, 58, 12, 4, 1],
  'svc-search': [24, 57, 13, 5, 1],
  'svc-billing': [15, 52, 19, 12, 2],
  'svc-notify': [30, 55, 11, 3, 1],
};
const DAYS = Array.from({ length: 42 }, (_, day) => new Date(Date.UTC(2026, 9, 5 + day)).toISOString().slice(0, 10));
/** Some non-ASCII, so that `ensure_ascii` has work to do: Latin-1, Latin Extended, Cyrillic, CJK. */
const NAMES = ['ada', 'olena', 'Zoë', 'José', 'Łukasz', 'Дмитро', 'søren', 'mei', '美玲', 'chloé', 'kwame', 'ivan', 'nia', 'omar', 'lena', 'raj'];
const CITIES = ['Kyiv', 'Київ', 'München', 'São Paulo', 'Łódź', 'Tokyo', '東京', 'Lagos', 'Zürich', 'Lima'];

type Draw = () => number;
type Template = (draw: Draw, service: EventService) => string;
const pick = <T>(draw: Draw, items: readonly T[]): T => items[Math.floor(draw() * items.length)] as T;
const number = (draw: Draw, below: number): number => Math.floor(draw() * below);
const name = (draw: Draw): string => pick(draw, NAMES);
const hex4 = (draw: Draw): string => number(draw, 0x10000).toString(16).padStart(4, '0');

/** Message templates per severity: mostly short, now and then a long one, as logs are. */
const MESSAGES: Record<EventSeverity, readonly Template[]> = {
  debug: [
    () => 'cache hit',
    () => 'cache miss',
    (draw) => `gc ${number(draw, 20)} ms`,
    (draw) => `pool ${number(draw, 64)}/64`,
    (draw) => `span ${hex4(draw)} end`,
  ],
  info: [
    () => 'ok',
    () => 'healthy',
    (draw) => `served in ${number(draw, 900)} ms`,
    (draw) => `login ${name(draw)}`,
    (draw) => `order #${number(draw, 100_000)}`,
    (draw) => `job ${number(draw, 1000)} done`,
    (draw) => `mail to ${name(draw)}`,
    (draw) => `geo ${pick(draw, CITIES)}`,
  ],
  warn: [
    (draw) => `slow query ${number(draw, 5000)} ms`,
    (draw) => `retry ${1 + number(draw, 3)}/3`,
    () => 'disk 91% full',
    (draw) => `rate limited ${name(draw)}`,
  ],
  error: [
    (draw, service) =>
      `timeout calling ${pick(
        draw,
        EVENT_SERVICES.filter((other) => other !== service),
      )} after ${1000 * (1 + number(draw, 30))} ms`,
    () => 'db connection reset',
    (draw) => `bad token for ${name(draw)}`,
    () => 'card declined',
    (draw) => `upstream answered 503 ${2 + number(draw, 4)} times in a row; circuit open for 30 s, requests shed meanwhile`,
  ],
  fatal: [() => 'out of memory', (draw, service) => `panic: nil map write in ${service} 💥`, () => 'cannot bind :8080'],
};
/** A long message now and then, at any severity: a stack trace's first line, with a city in it. */
const LONG_MESSAGE: Template = (draw, service) =>
  `unhandled error in ${service} handler for ${pick(draw, CITIES)} (${name(draw)}): TypeError: cannot read properties of undefined (reading 'id') 🔥`;

/** 32-bit finalizer of MurmurHash3: a bijection, so distinct inputs give distinct outputs. */
function mix32(value: number): number {
  let hash = value >>> 0;
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85eb_ca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2_ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/** mulberry32 from a state of the seed and the index, so that any row can be made alone. */
function drawsFor(index: number, seed: number): Draw {
  let state = mix32(mix32(seed) + Math.imul(index, 0x9e37_79b9));
  return () => {
    state = (state + 0x6d2b_79f5) | 0;
    let value = Math.imul(state ^ (state >>> 15), state | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function weighted(draw: Draw, weights: readonly number[]): number {
  let roll = draw() * 100;
  for (let index = 0; index < weights.length; index++) {
    roll -= weights[index] as number;
    if (roll < 0) return index;
  }
  return weights.length - 1;
}

const hex8 = (value: number): string => value.toString(16).padStart(8, '0');

function makeEvent(index: number, seed: number): BigGraphEvent {
  const draw = drawsFor(index, seed);
  const service = EVENT_SERVICES[weighted(draw, SERVICE_WEIGHTS)] as EventService;
  const severity = EVENT_SEVERITIES[weighted(draw, SEVERITY_WEIGHTS[service])] as EventSeverity;
  const day = pick(draw, DAYS);
  // The low half is a bijection of the index for one seed: no two events of a graph share a trace id.
  const traceId = `tr-${hex8(number(draw, 4_294_967_296))}${hex8(mix32(index ^ mix32(seed ^ 0xa5a5_a5a5)))}`;
  const message = draw() < 0.03 ? LONG_MESSAGE(draw, service) : pick(draw, MESSAGES[severity])(draw, service);
  return { id: `ev-${String(index).padStart(6, '0')}`, label: 'Event', service, severity, day, trace_id: traceId, message };
}

/**
 * Checks a big graph's size and seed as given in code, naming them as the caller knows them.
 * @throws {RangeError} naming the key, its range and the value.
 */
export function checkBigGraph(events: number, seed: number, keys: { events: string; seed: string } = { events: 'events', seed: 'seed' }): void {
  checkInteger(events, MAX_EVENTS, keys.events);
  checkInteger(seed, 0xffff_ffff, keys.seed);
}

function checkInteger(value: number, max: number, key: string): void {
  if (!Number.isInteger(value) || value < 0 || value > max) throw new RangeError(`Expected \`${key}\` to be an integer from 0 to ${max}, got ${String(value)}`);
}

/**
 * The row `query_graph` answers for event `index` of the big graph made from `seed`: exactly
 * `{"e": {id, label, service, severity, day, trace_id, message}}`, the same every time, made on its own (the big
 * graph's N rows are `eventRow(0, seed)` to `eventRow(N - 1, seed)`, in that order).
 *
 * @param seed - @default 1
 * @throws {RangeError} for an index outside 0 to {@link MAX_EVENTS} − 1 or a seed outside 0 to 2^32 − 1.
 */
export function eventRow(index: number, seed = 1): EventRow {
  checkInteger(index, MAX_EVENTS - 1, 'index');
  checkInteger(seed, 0xffff_ffff, 'seed');
  return { e: makeEvent(index, seed) };
}

/** What is true of the big graph of `events` events made from `seed`: the answers a test or bench checks a run against. */
export interface BigGraphFacts {
  readonly events: number;
  readonly seed: number;
  /** Events of severity `error` (not `fatal`) per service; every service is named, with 0 when it has none. */
  readonly errorsByService: Readonly<Record<EventService, number>>;
  /** Events per service and severity; every pair is named. */
  readonly countsByService: Readonly<Record<EventService, Readonly<Record<EventSeverity, number>>>>;
  /** Events per severity. */
  readonly countsBySeverity: Readonly<Record<EventSeverity, number>>;
  /** The row of the event with this trace id, or `undefined` when no event has it. */
  rowOfTrace(traceId: string): EventRow | undefined;
}

const zeros = (): Record<EventSeverity, number> => ({ debug: 0, info: 0, warn: 0, error: 0, fatal: 0 });

/**
 * Counts what the big graph of `events` events made from `seed` holds, by generating it (about 0.1 s for 120,000).
 *
 * @param seed - @default 1
 * @throws {RangeError} for a size or seed out of range, as {@link checkBigGraph} says.
 * @example
 * ```ts
 * const facts = bigGraphFacts(120_000)
 * facts.errorsByService['svc-billing'] // what an agent asked "errors per service" should answer
 * ```
 */
export function bigGraphFacts(events: number, seed = 1): BigGraphFacts {
  checkBigGraph(events, seed);
  const countsByService = Object.fromEntries(EVENT_SERVICES.map((service) => [service, zeros()])) as Record<EventService, Record<EventSeverity, number>>;
  const countsBySeverity = zeros();
  const traces = new Map<string, number>();
  for (let index = 0; index < events; index++) {
    const event = makeEvent(index, seed);
    countsByService[event.service][event.severity]++;
    countsBySeverity[event.severity]++;
    traces.set(event.trace_id, index);
  }
  const errorsByService = Object.fromEntries(EVENT_SERVICES.map((service) => [service, countsByService[service].error])) as Record<EventService, number>;
  return {
    events,
    seed,
    errorsByService,
    countsByService,
    countsBySeverity,
    rowOfTrace(traceId) {
      const index = traces.get(traceId);
      return index === undefined ? undefined : { e: makeEvent(index, seed) };
    },
  };
}

/**
 * The big graph's Event nodes, made on demand from their count and seed (they are not held as objects). The
 * answer to the whole set is serialized once per variable name and kept, so that repeated queries cost no
 * serialization.
 */
export class BigGraph {
  readonly events: number;
  readonly seed: number;
  readonly #serialized = new Map<string, string>();

  /** @throws {RangeError} for a size or seed out of range, as {@link checkBigGraph} says. */
  constructor(events: number, seed = 1) {
    checkBigGraph(events, seed);
    this.events = events;
    this.seed = seed;
  }

  /** The rows of `MATCH (<variable>:Event) [WHERE <variable>.<property> = '<equals>'] RETURN <variable> [LIMIT <limit>]`. */
  rows<Variable extends string>(
    variable: Variable,
    filter?: { readonly property: string; readonly equals: string },
    limit = Infinity,
  ): Record<Variable, BigGraphEvent>[] {
    const rows: Record<Variable, BigGraphEvent>[] = [];
    for (let index = 0; index < this.events && rows.length < limit; index++) {
      const event = makeEvent(index, this.seed);
      if (filter === undefined || (event as unknown as Record<string, unknown>)[filter.property] === filter.equals)
        rows.push({ [variable]: event } as Record<Variable, BigGraphEvent>);
    }
    return rows;
  }

  /** The JSON text of every row keyed by `variable`, as Python's `json.dumps` writes it; made once per variable. */
  serializedRows(variable: string): string {
    let text = this.#serialized.get(variable);
    if (text === undefined) {
      text = serializeEvents(this.events, this.seed, variable);
      this.#serialized.set(variable, text);
    }
    return text;
  }
}

/**
 * What `pythonJsonDumps` writes for the rows, written directly: the keys are fixed, and every value but the
 * message is printable ASCII by construction, so only the message needs escaping (the tests check the two agree).
 * The text is all ASCII, so it goes into one buffer grown as needed: a 21 MB string built with `+=` is a rope of
 * a million pieces that the garbage collector then walks, about twice as slow.
 */
function serializeEvents(events: number, seed: number, variable: string): string {
  const head = `{${pythonJsonString(variable)}: {"id": "`;
  // Rows average about 180 bytes: room for 190 each, and the buffer grows by a quarter when a run of long messages needs it.
  let buffer = Buffer.allocUnsafe(2 + events * 190);
  let length = buffer.write('[', 0, 'latin1');
  for (let index = 0; index < events; index++) {
    const event = makeEvent(index, seed);
    const row = `${index === 0 ? '' : ', '}${head}${event.id}", "label": "Event", "service": "${event.service}", "severity": "${event.severity}", "day": "${event.day}", "trace_id": "${event.trace_id}", "message": ${pythonJsonString(event.message)}}}`;
    if (length + row.length + 1 > buffer.length) buffer = Buffer.concat([buffer.subarray(0, length)], Math.ceil(buffer.length * 1.25) + row.length);
    length += buffer.write(row, length, 'latin1');
  }
  length += buffer.write(']', length, 'latin1');
  return buffer.toString('latin1', 0, length);
}
