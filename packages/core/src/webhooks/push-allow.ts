import { lookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent, type Dispatcher } from 'undici';
import { KlymError } from '../errors.ts';

/** The allow-list entry that admits any http(s) URL whose host is public. */
export const ANY_PUBLIC_URL = '*';

/**
 * What a caller's push URL came to: the URL to use, or why it is refused (a sentence naming the URL without its
 * query). `publicOnly`: admitted by `*` rather than by an entry naming it, so it is to be reached only at public
 * addresses, its host resolved again as each connection opens (the list's `dispatcher` does so).
 */
export type PushUrlVerdict =
  { readonly allowed: true; readonly url: string; readonly publicOnly: boolean } | { readonly allowed: false; readonly reason: string };

/** Resolves a host name to its addresses (`dns.lookup` with `all: true`), for a test to replace. */
export type HostLookup = (hostname: string) => Promise<readonly { readonly address: string; readonly family?: number }[]>;

/** Options of {@link createPushAllowList}. */
export interface PushAllowListOptions {
  /** Resolves host names for the `*` entry. @default `dns.lookup(host, { all: true })` */
  readonly lookup?: HostLookup;
  /** How long a name may take to resolve before the URL is refused. @default 5_000 */
  readonly lookupTimeoutMs?: number;
  /** What the list is called in refusals and config errors. @default 'a2a.pushAllow' */
  readonly name?: string;
}

/** An operator's allow-list of the URLs callers may have Klym POST their push notifications to. */
export interface PushAllowList {
  /** The entries as configured. */
  readonly entries: readonly string[];
  /**
   * Whether a caller may have notifications sent to `url`: see {@link createPushAllowList} for the rule.
   * Never throws: a refusal says why.
   */
  check(url: string): Promise<PushUrlVerdict>;
  /**
   * The HTTP client for URLs the list admits by `*` (`publicOnly`), `undefined` without `*`: it resolves each
   * host again as a connection opens and refuses one with any address that is not public, so that a name
   * that passed `check` and then resolves to a loopback or private address (DNS rebinding) is never reached.
   */
  readonly dispatcher: Dispatcher | undefined;
}

/** Longest push URL taken: longer ones are refused rather than stored with every task. */
export const MAX_PUSH_URL_LENGTH = 2_048;

/**
 * IPv4 networks that reach this host or its private networks, never the public internet: this network,
 * private (RFC 1918), shared (CGNAT), loopback, link-local (cloud metadata at 169.254.169.254), IETF protocol,
 * benchmarking, multicast and reserved (broadcast included).
 */
const NOT_PUBLIC_IPV4 = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const;

/**
 * IPv6 networks that are not public, whatever follows the prefix: unspecified, loopback and the deprecated
 * IPv4-compatible addresses (`::a.b.c.d`, RFC 4291 §2.5.5.1: no public host has one, and a host that still
 * tunnels them would carry them to the IPv4 address), local-use NAT64 (`64:ff9b:1::/48`, RFC 8215: a
 * translator of the operator's own network, which may put the IPv4 address anywhere in the suffix), unique
 * local, link-local, site-local (`fec0::/10`, deprecated by RFC 3879 but still routed by some networks as
 * private) and multicast.
 */
const NOT_PUBLIC_IPV6 = [
  ['::', 96],
  ['64:ff9b:1::', 48],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const;

/**
 * Where IPv6 forms carry an IPv4 address, each judged as the address it carries, since a translator or tunnel
 * on the way delivers it there: NAT64's well-known prefix (`64:ff9b::/96`, RFC 6052: the last 32 bits), 6to4
 * (`2002::/16`, RFC 3056: bits 16 to 48) and SIIT's IPv4-translated form (`::ffff:0:a.b.c.d`, RFC 2765).
 * IPv4-mapped addresses (`::ffff:a.b.c.d`) need no entry: `BlockList` judges them by the IPv4 rules itself.
 */
const IPV4_CARRIERS: readonly ((hex: string, prefix: number) => readonly [string, number])[] = [
  (hex, prefix) => [`64:ff9b::${hex}`, 96 + prefix],
  (hex, prefix) => [`2002:${hex}::`, 16 + prefix],
  (hex, prefix) => [`::ffff:0:${hex}`, 96 + prefix],
];

/** An IPv4 address as the two hexadecimal groups of an IPv6 address (`127.0.0.1` → `7f00:1`). */
function ipv4Groups(address: string): string {
  const [a = 0, b = 0, c = 0, d = 0] = address.split('.').map(Number);
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

/**
 * Addresses that reach this host or its private networks, never the public internet: the `*` entry does not
 * reach them (SSRF). The networks above, and each IPv6 form that carries one of the IPv4 networks.
 */
const NOT_PUBLIC = new BlockList();
for (const [network, prefix] of NOT_PUBLIC_IPV4) {
  NOT_PUBLIC.addSubnet(network, prefix, 'ipv4');
  for (const carrier of IPV4_CARRIERS) NOT_PUBLIC.addSubnet(...carrier(ipv4Groups(network), prefix), 'ipv6');
}
for (const [network, prefix] of NOT_PUBLIC_IPV6) NOT_PUBLIC.addSubnet(network, prefix, 'ipv6');

/** Whether `address` (a literal IPv4 or IPv6 address) is loopback, private, link-local or otherwise not public. */
export function isNonPublicAddress(address: string): boolean {
  const version = isIP(address);
  return version === 0 ? false : NOT_PUBLIC.check(address, version === 4 ? 'ipv4' : 'ipv6');
}

/** A host that names this machine whatever it resolves to: `localhost` and its subdomains (RFC 6761). */
const LOCAL_NAME = /(^|\.)localhost$/i;

interface PrefixEntry {
  readonly text: string;
  readonly origin: string;
  readonly path: string;
}

const defaultLookup: HostLookup = (hostname) => lookup(hostname, { all: true, verbatim: true });

/** A URL's host without IPv6 brackets or a trailing dot. */
const hostOf = (url: URL): string => url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');

/** How a URL is named in a refusal: scheme, host, port and path, never its query (which may hold a token). */
const shown = (url: URL): string => `${url.origin}${url.pathname}`;

/**
 * Creates the allow-list of push URLs from the operator's entries. Each entry is either
 * - `*`: any http(s) URL whose host is public — not loopback (`localhost` included), private, link-local or
 *   otherwise not public, whether written as an IP address or a name that resolves to one (every address
 *   the name resolves to when the URL is checked must be public); or
 * - a URL, `https://hooks.example.com/a2a`: a push URL matches it when both have the same origin (scheme,
 *   host, port) and the push URL's path is the entry's or lies below it (`/a2a`, `/a2a/x`; not `/a2a-x`).
 *   An origin alone (`https://hooks.example.com`) matches every path there. The host is then named by the
 *   operator, so it is admitted whatever it is: loopback and private receivers are reached only this way.
 *
 * A push URL must be http(s), without user name or password, at most 2,048 characters. An empty list admits
 * nothing.
 *
 * @throws {KlymError} `CONFIG_INVALID` naming an entry that is neither `*` nor an http(s) URL without query,
 * fragment or credentials.
 * @example
 * ```ts
 * const allow = createPushAllowList(['https://hooks.example.com/a2a', 'http://127.0.0.1:9000'])
 * await allow.check('https://hooks.example.com/a2a/task-1') // { allowed: true, url: … }
 * await allow.check('http://127.0.0.1:8765/api') // { allowed: false, reason: '… matches no entry of a2a.pushAllow' }
 * ```
 */
export function createPushAllowList(entries: readonly string[], options: PushAllowListOptions = {}): PushAllowList {
  const name = options.name ?? 'a2a.pushAllow';
  const resolve = options.lookup ?? defaultLookup;
  const lookupTimeoutMs = options.lookupTimeoutMs ?? 5_000;
  let anyPublic = false;
  const prefixes: PrefixEntry[] = [];
  for (const entry of entries) {
    if (entry === ANY_PUBLIC_URL) {
      anyPublic = true;
      continue;
    }
    const url = URL.canParse(entry) ? new URL(entry) : undefined;
    if (url === undefined || !/^https?:$/.test(url.protocol) || url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
      throw new KlymError(
        'CONFIG_INVALID',
        `Expected each entry of \`${name}\` to be "*" or an http(s) URL without query, fragment or credentials, got ${JSON.stringify(entry.slice(0, 200))}`,
      );
    }
    prefixes.push({ text: entry, origin: url.origin, path: url.pathname });
  }

  const named = (url: URL): boolean =>
    prefixes.some(
      ({ origin, path }) => origin === url.origin && (path === '/' || url.pathname === path || url.pathname.startsWith(path.endsWith('/') ? path : `${path}/`)),
    );

  /** Why `url`'s host is not public, or `undefined` when every address it has is. */
  const notPublic = async (url: URL): Promise<string | undefined> => {
    const host = hostOf(url);
    if (LOCAL_NAME.test(host)) return `its host ${host} is this machine`;
    if (isIP(host) !== 0) return isNonPublicAddress(host) ? `its host ${host} is a loopback, private or link-local address` : undefined;
    try {
      const addresses = await lookupWithin(resolve, host, lookupTimeoutMs);
      if (addresses.length === 0) return `its host ${host} has no address`;
      const inside = addresses.find(({ address }) => isNonPublicAddress(address));
      return inside === undefined ? undefined : `its host ${host} resolves to ${inside.address}, a loopback, private or link-local address`;
    } catch (error) {
      return `its host ${host} could not be resolved (${error instanceof Error ? error.message : String(error)})`;
    }
  };

  return {
    entries: [...entries],
    dispatcher: anyPublic ? publicOnlyDispatcher(resolve, lookupTimeoutMs) : undefined,
    async check(text) {
      if (typeof text !== 'string' || text.length > MAX_PUSH_URL_LENGTH || !URL.canParse(text)) {
        return { allowed: false, reason: `The push URL must be an http(s) URL of at most ${MAX_PUSH_URL_LENGTH} characters` };
      }
      const url = new URL(text);
      if (!/^https?:$/.test(url.protocol)) return { allowed: false, reason: `The push URL must be http(s), got ${url.protocol}` };
      if (url.username !== '' || url.password !== '')
        return { allowed: false, reason: 'The push URL must not carry a user name or password: send credentials in `authentication`' };
      if (named(url)) return { allowed: true, url: url.href, publicOnly: false };
      if (!anyPublic) return { allowed: false, reason: `Klym sends no push notification to ${shown(url)}: it matches no entry of ${name}` };
      const why = await notPublic(url);
      if (why === undefined) return { allowed: true, url: url.href, publicOnly: true };
      return {
        allowed: false,
        reason: `Klym sends no push notification to ${shown(url)}: ${why}, which "*" in ${name} does not admit (only an entry naming it does)`,
      };
    },
  };
}

/** `resolve(host)`, or a failure `no answer within … ms` once `timeoutMs` has passed; the timer is cleared either way. */
async function lookupWithin(resolve: HostLookup, host: string, timeoutMs: number): ReturnType<HostLookup> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([resolve(host), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * An undici dispatcher whose connections open only to public addresses: the socket's own lookup resolves the
 * host with `resolve` and fails, naming the address, when any address it has is not public. A literal IP needs
 * no lookup: `check` has judged it already, and it cannot change.
 */
function publicOnlyDispatcher(resolve: HostLookup, lookupTimeoutMs: number): Dispatcher {
  const guarded: LookupFunction = (hostname, options, callback) => {
    lookupWithin(resolve, hostname, lookupTimeoutMs).then(
      (addresses) => {
        const inside = addresses.find(({ address }) => isNonPublicAddress(address));
        if (addresses.length === 0 || inside !== undefined) {
          const why = inside === undefined ? 'has no address' : `resolves to ${inside.address}, a loopback, private or link-local address`;
          callback(Object.assign(new Error(`its host ${hostname} ${why} as Klym connects`), { code: 'ENOTPUBLIC' }), '', 0);
          return;
        }
        const all = addresses.map(({ address, family }) => ({ address, family: family ?? isIP(address) }));
        if (options.all === true) (callback as unknown as (error: null, addresses: typeof all) => void)(null, all);
        else callback(null, all[0]!.address, all[0]!.family);
      },
      (error: unknown) => callback(error as NodeJS.ErrnoException, '', 0),
    );
  };
  return new Agent({ connect: { lookup: guarded } });
}
