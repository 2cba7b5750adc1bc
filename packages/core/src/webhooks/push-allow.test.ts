import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createPushAllowList, isNonPublicAddress, type HostLookup, type PushAllowList } from './push-allow.ts';
import { taskRecord } from '../../../../test/support/task-fixtures.ts';
import { createMemoryTaskStore } from '../tasks/store/memory-task-store.ts';
import { pushAttemptTarget, resolvePushOptions } from './push-delivery.ts';
import { sendWebhook, type AttemptTarget } from './send-webhook.ts';
import type { WebhookMessage } from './webhook-types.ts';

/** A resolver with fixed answers, so no test asks a real DNS. */
const lookup =
  (answers: Readonly<Record<string, readonly string[]>>): HostLookup =>
  async (hostname) => {
    const addresses = answers[hostname];
    if (addresses === undefined) throw new Error(`getaddrinfo ENOTFOUND ${hostname}`);
    return addresses.map((address) => ({ address }));
  };

/** Admitted: by an entry naming it, or by `*` (`publicOnly`: then reached at public addresses only). */
const allowed = (url: string, publicOnly = false) => ({ allowed: true, url, publicOnly });
/** Each URL with its verdict, so that a failure names the URL. */
const verdicts = async (allow: PushAllowList, urls: readonly string[]) =>
  Object.fromEntries(await Promise.all(urls.map(async (url) => [url, await allow.check(url)] as const)));
const each = <T>(keys: readonly string[], value: T) => Object.fromEntries(keys.map((key) => [key, value]));
const judged = (addresses: readonly string[]) => Object.fromEntries(addresses.map((address) => [address, isNonPublicAddress(address)]));
const refused = (reason: RegExp | string) => ({
  allowed: false,
  reason: typeof reason === 'string' ? expect.stringContaining(reason) : expect.stringMatching(reason),
});

describe('createPushAllowList', () => {
  it('admits a URL of an entry’s origin whose path is the entry’s or below it, and nothing else', async () => {
    const allow = createPushAllowList(['https://hooks.example.com/a2a', 'https://ops.example.com', 'https://both.example.com/in/']);
    for (const url of [
      'https://hooks.example.com/a2a',
      'https://hooks.example.com/a2a/',
      'https://hooks.example.com/a2a/task?id=1',
      'https://ops.example.com/anything/at/all',
      'https://both.example.com/in/x',
    ]) {
      expect(await allow.check(url)).toEqual(allowed(url));
    }
    // The URL parser's normal form is what is compared: case, default port, dot segments.
    expect(await allow.check('HTTPS://Hooks.Example.com:443/a2a/x')).toEqual(allowed('https://hooks.example.com/a2a/x'));
    const outside = [
      'https://hooks.example.com/a2a-evil',
      'https://hooks.example.com/a2',
      'https://hooks.example.com/other',
      'https://hooks.example.com/a2a/../admin',
      'https://hooks.example.com/a2a/%2e%2e/admin',
      'http://hooks.example.com/a2a',
      'https://hooks.example.com:8443/a2a',
      'https://evil.hooks.example.com/a2a',
      'https://hooks.example.com.evil.net/a2a',
      'https://both.example.com/in',
    ];
    expect(await verdicts(allow, outside)).toEqual(each(outside, refused('matches no entry of a2a.pushAllow')));
  });

  it('admits a loopback or private receiver only through an entry naming it', async () => {
    const allow = createPushAllowList(['http://127.0.0.1:9000/hooks', 'http://localhost:9001', 'http://[::1]:9002', 'http://10.1.2.3', '*'], {
      lookup: lookup({}),
    });
    expect(await allow.check('http://127.0.0.1:9000/hooks/a2a')).toEqual(allowed('http://127.0.0.1:9000/hooks/a2a'));
    expect(await allow.check('http://localhost:9001/x')).toEqual(allowed('http://localhost:9001/x'));
    expect(await allow.check('http://[::1]:9002/x')).toEqual(allowed('http://[::1]:9002/x'));
    expect(await allow.check('http://10.1.2.3/x')).toEqual(allowed('http://10.1.2.3/x'));
    // The same hosts on a port, path or name no entry names: `*` does not reach them.
    expect(await allow.check('http://127.0.0.1:9000/api')).toEqual(refused('a loopback, private or link-local address'));
    expect(await allow.check('http://127.0.0.1:8765/mcp')).toEqual(refused('its host 127.0.0.1 is a loopback'));
    expect(await allow.check('http://localhost:9000/hooks')).toEqual(refused('its host localhost is this machine'));
    expect(await allow.check('http://10.1.2.4/x')).toEqual(refused('its host 10.1.2.4 is'));
  });

  it('lets `*` admit public hosts only: by address, and by every address a name resolves to', async () => {
    const allow = createPushAllowList(['*'], {
      lookup: lookup({
        'public.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
        'sneaky.example.com': ['93.184.215.14', '10.0.0.7'],
        'none.example.com': [],
        'nat64.example.com': ['64:ff9b::a9fe:a9fe'],
      }),
    });
    expect(await allow.check('https://public.example.com/hook')).toEqual(allowed('https://public.example.com/hook', true));
    expect(await allow.check('http://93.184.215.14/hook')).toEqual(allowed('http://93.184.215.14/hook', true));
    expect(await allow.check('https://sneaky.example.com/hook')).toEqual(refused('resolves to 10.0.0.7'));
    expect(await allow.check('https://nat64.example.com/hook')).toEqual(refused('resolves to 64:ff9b::a9fe:a9fe'));
    expect(await allow.check('https://none.example.com/hook')).toEqual(refused('has no address'));
    expect(await allow.check('https://unknown.example.com/hook')).toEqual(refused('could not be resolved (getaddrinfo ENOTFOUND unknown.example.com)'));
    const inside = [
      'http://127.0.0.1/',
      'http://127.1/',
      'http://2130706433/',
      'http://0x7f000001/',
      'http://0.0.0.0/',
      'http://[::1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:10.0.0.1]/',
      'http://[64:ff9b::7f00:1]/',
      'http://[2002:a9fe:a9fe::]/latest/meta-data',
      'http://[fec0::1]/',
      'http://169.254.169.254/latest/meta-data',
      'http://[fe80::1]/',
      'http://[fd00::1]/',
      'http://192.168.1.1/',
      'http://172.31.255.255/',
      'http://100.64.0.1/',
      'http://localhost/',
      'http://LOCALHOST./',
      'http://app.localhost/',
    ];
    expect(await verdicts(allow, inside)).toEqual(each(inside, refused(/which "\*" in a2a\.pushAllow does not admit \(only an entry naming it does\)$/)));
  });

  it('reaches a URL `*` admitted only at public addresses, resolved again as it connects: a name that rebinds to loopback is never reached', async () => {
    let requests = 0;
    const receiver = createServer((_request, response) => {
      requests++;
      response.end();
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    const { port } = receiver.address() as AddressInfo;
    // Public when the URL is checked, given and before the attempt; this machine when Klym connects (DNS rebinding).
    const answers = [['93.184.215.14'], ['93.184.215.14'], ['127.0.0.1']];
    const allow = createPushAllowList(['*', `http://127.0.0.1:${port}/named`], {
      lookup: async () => (answers.shift() ?? ['127.0.0.1']).map((address) => ({ address })),
    });
    try {
      const url = `http://rebind.example.com:${port}/hook`;
      expect(await allow.check(url)).toEqual(allowed(url, true));
      const message: WebhookMessage = {
        id: 'msg_1',
        taskId: 't1',
        endpoint: 'push:p1',
        type: 'task.completed',
        payload: '{}',
        createdAt: 0,
        attempts: 0,
        nextAttemptAt: 0,
      };
      // Delivery connects through the guard for the URL `*` admitted, and directly for one an entry names.
      const store = createMemoryTaskStore();
      const named = `http://127.0.0.1:${port}/named`;
      await store.insert(
        taskRecord('t1', {
          push: [
            { id: 'p1', url },
            { id: 'p2', url: named },
          ],
        }),
      );
      const options = { ...resolvePushOptions({ allow: [], format: { contentType: 'application/json', body: () => ({}) } }), allow };
      const guarded = await pushAttemptTarget(store, message, options);
      expect(guarded).toMatchObject({ url, dispatcher: allow.dispatcher });
      expect(await pushAttemptTarget(store, { ...message, endpoint: 'push:p2' }, options)).not.toHaveProperty('dispatcher');
      const outcome = await sendWebhook(guarded as AttemptTarget, message);
      expect(outcome).toEqual({
        ok: false,
        error: 'ENOTPUBLIC: its host rebind.example.com resolves to 127.0.0.1, a loopback, private or link-local address as Klym connects',
      });
      expect(requests).toBe(0);
      // An entry naming the receiver reaches it, loopback or not.
      expect(await allow.check(named)).toEqual(allowed(named));
      expect(await sendWebhook({ url: named, timeoutMs: 5_000 }, message)).toEqual({ ok: true, status: 200 });
      expect(requests).toBe(1);
    } finally {
      receiver.close();
      await allow.dispatcher?.close();
    }
  });

  it('refuses what is not an http(s) URL, or carries credentials, naming no query', async () => {
    const allow = createPushAllowList(['*', 'https://hooks.example.com'], { lookup: lookup({}) });
    expect(await allow.check('ftp://hooks.example.com/x')).toEqual(refused('must be http(s), got ftp:'));
    expect(await allow.check('file:///etc/passwd')).toEqual(refused('must be http(s)'));
    expect(await allow.check('not a url')).toEqual(refused('must be an http(s) URL'));
    expect(await allow.check(`https://hooks.example.com/${'x'.repeat(2_100)}`)).toEqual(refused('at most 2048 characters'));
    expect(await allow.check('https://user:pass@hooks.example.com/x')).toEqual(refused('must not carry a user name or password'));
    const verdict = await allow.check('http://127.0.0.1/x?token=secret-token-value');
    expect(JSON.stringify(verdict)).not.toContain('secret-token-value');
  });

  it('admits nothing when empty, and refuses an entry that is neither `*` nor a plain http(s) URL', async () => {
    expect(await createPushAllowList([]).check('https://hooks.example.com/')).toEqual(refused('matches no entry'));
    const entries = [
      'hooks.example.com',
      'ftp://hooks.example.com',
      'https://hooks.example.com/?q=1',
      'https://hooks.example.com/#x',
      'https://u:p@hooks.example.com',
      '**',
    ];
    const thrown = entries.map((entry) => {
      try {
        createPushAllowList([entry]);
        return undefined;
      } catch (error) {
        return error;
      }
    });
    expect(thrown).toEqual(entries.map(() => expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringContaining('`a2a.pushAllow`') })));
  });
});

describe('isNonPublicAddress', () => {
  it('knows loopback, private, link-local and reserved ranges from public ones', () => {
    const inside = [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.0.1',
      '192.168.0.1',
      '169.254.1.1',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::',
      '::1',
      'fc00::1',
      'fe80::1',
      'ff02::1',
      '::ffff:127.0.0.1',
    ];
    const outside = ['8.8.8.8', '93.184.215.14', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8', 'example.com'];
    expect(judged(inside)).toEqual(each(inside, true));
    expect(judged(outside)).toEqual(each(outside, false));
  });

  it('judges an IPv4 address an IPv6 form carries by the IPv4 rules: NAT64, 6to4, mapped, translated', () => {
    // [form, the IPv4 address it carries]: each refused or admitted as that address is.
    const carried = [
      ['64:ff9b::7f00:1', '127.0.0.1'],
      ['64:ff9b::127.0.0.1', '127.0.0.1'],
      ['64:ff9b::a00:1', '10.0.0.1'],
      ['64:ff9b::a9fe:a9fe', '169.254.169.254'],
      ['64:ff9b::c0a8:101', '192.168.1.1'],
      ['64:ff9b::808:808', '8.8.8.8'],
      ['64:ff9b::5db8:d70e', '93.184.215.14'],
      ['2002:7f00:1::', '127.0.0.1'],
      ['2002:7f00:1:1234:5678::1', '127.0.0.1'],
      ['2002:a00:1::1', '10.0.0.1'],
      ['2002:ac10:1::', '172.16.0.1'],
      ['2002:a9fe:a9fe::', '169.254.169.254'],
      ['2002:808:808::', '8.8.8.8'],
      ['2002:808:808:1::1', '8.8.8.8'],
      ['::ffff:7f00:1', '127.0.0.1'],
      ['::ffff:a9fe:a9fe', '169.254.169.254'],
      ['::ffff:808:808', '8.8.8.8'],
      ['::ffff:0:7f00:1', '127.0.0.1'],
      ['::ffff:0:c0a8:101', '192.168.1.1'],
      ['::ffff:0:808:808', '8.8.8.8'],
    ] as const;
    expect(judged(carried.map(([form]) => form))).toEqual(Object.fromEntries(carried.map(([form, ipv4]) => [form, isNonPublicAddress(ipv4)])));
    // The cases above hold both verdicts: the table would pass with every form public, or every one not.
    expect(new Set(carried.map(([, ipv4]) => isNonPublicAddress(ipv4)))).toEqual(new Set([true, false]));
  });

  it('refuses whole the IPv6 ranges that are never public: site-local, local-use NAT64, IPv4-compatible', () => {
    const inside = ['fec0::1', 'feff:ffff::1', '64:ff9b:1::808:808', '64:ff9b:1:ffff::1', '::808:808', '::8.8.8.8', '::7f00:1', '::a00:1'];
    // Their neighbours stay public.
    const outside = ['ff0::1', 'fbff::1', '64:ff9b:2::1', '64:ff9a::808:808', '2003:7f00:1::', '2001:4860:4860::8888', '1::808:808'];
    expect(judged(inside)).toEqual(each(inside, true));
    expect(judged(outside)).toEqual(each(outside, false));
  });
});
