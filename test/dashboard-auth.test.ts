// The dashboard's login and its guards, over real HTTP against a real server: what a browser is given,
// and what a page of another site, or a request without a login, is refused.
import { afterEach, describe, expect, it } from 'vitest';
import { startTask, taskStatus } from './support/dashboard.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';
import { floodingRunner } from './support/server-runners.ts';

const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };

let harness: ServerHarness | undefined;
afterEach(async () => {
  await harness?.cleanup();
  harness = undefined;
});

/** Posts a form the way a browser does, from `origin` (none: no Origin header). */
function post(url: string, fields: Record<string, string>, options: { origin?: string; cookie?: string } = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      'Content-Type': 'application/x-www-form-urlencoded',
      ...(options.origin === undefined ? {} : { Origin: options.origin }),
      ...(options.cookie === undefined ? {} : { Cookie: options.cookie }),
    },
    body: new URLSearchParams(fields).toString(),
  });
}

async function logIn(base: string, token: string): Promise<string> {
  const response = await post(`${base}/dashboard/login`, { token, next: '/' }, { origin: base });
  expect(response.status).toBe(303);
  return (response.headers.getSetCookie()[0] ?? '').split(';')[0] as string;
}

describe('the dashboard with tokens', () => {
  it('takes a token once and gives an HttpOnly, SameSite=Strict session cookie that does not hold it', async () => {
    harness = await startHarness({ tasks: { run: floodingRunner(0) }, auth: { tokens: TOKENS } });
    const base = harness.server.url;
    const first = await fetch(`${base}/`, { redirect: 'manual' });
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/dashboard/login?next=%2F');

    const wrong = await post(`${base}/dashboard/login`, { token: 'not-a-token-of-anyone', next: '/' }, { origin: base });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.getSetCookie()).toEqual([]);
    expect(await wrong.text()).toContain('That token is not valid.');

    const login = await post(`${base}/dashboard/login`, { token: TOKENS.alice, next: '/?status=running' }, { origin: base });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/?status=running');
    const [cookie] = login.headers.getSetCookie();
    expect(cookie).toMatch(/^klym_session=[A-Za-z0-9_-]{43}; /);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).not.toContain(TOKENS.alice);

    const page = await fetch(`${base}/`, { headers: { Cookie: (cookie as string).split(';')[0] as string } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const body = await page.text();
    expect(body).toContain('<span class="principal">alice</span>');
    expect(body).not.toContain(TOKENS.alice);
  });

  it('never sends the browser elsewhere after the login', async () => {
    harness = await startHarness({ tasks: { run: floodingRunner(0) }, auth: { tokens: TOKENS } });
    const base = harness.server.url;
    for (const next of ['//evil.example/', 'https://evil.example/', '/\\evil.example']) {
      const login = await post(`${base}/dashboard/login`, { token: TOKENS.alice, next }, { origin: base });
      expect(login.headers.get('location')).toBe('/');
    }
  });

  it('refuses a login, a logout or a cancel that does not come from its own origin', async () => {
    harness = await startHarness({ tasks: { run: floodingRunner(0) }, auth: { tokens: TOKENS } });
    const base = harness.server.url;
    const cookie = await logIn(base, TOKENS.alice);
    const id = await startTask(base, TOKENS.alice, 'Stay running');
    const port = new URL(base).port;
    // No Origin; the same host on another port; another site (refused by the server's own Origin guard first).
    for (const origin of [undefined, `http://127.0.0.1:${Number(port) === 1 ? 2 : 1}`, 'http://evil.example']) {
      const login = await post(`${base}/dashboard/login`, { token: TOKENS.alice }, origin === undefined ? {} : { origin });
      expect(login.status).toBe(403);
      expect(login.headers.getSetCookie()).toEqual([]);
      const cancel = await post(`${base}/dashboard/tasks/${id}/cancel`, {}, { cookie, ...(origin === undefined ? {} : { origin }) });
      expect(cancel.status).toBe(403);
      const logout = await post(`${base}/dashboard/logout`, {}, { cookie, ...(origin === undefined ? {} : { origin }) });
      expect(logout.status).toBe(403);
    }
    expect(await taskStatus(base, TOKENS.alice, id)).toMatchObject({ status: 'running' });
    expect((await fetch(`${base}/`, { headers: { Cookie: cookie } })).status).toBe(200);

    const cancel = await post(`${base}/dashboard/tasks/${id}/cancel`, {}, { cookie, origin: base });
    expect(cancel.status).toBe(303);
    expect(await taskStatus(base, TOKENS.alice, id)).toMatchObject({ status: 'cancelled' });
  });

  it('ends the session at logout; the cookie never opens the bearer API, nor a live part without a login', async () => {
    harness = await startHarness({ tasks: { run: floodingRunner(0) }, auth: { tokens: TOKENS } });
    const base = harness.server.url;
    const cookie = await logIn(base, TOKENS.bob);
    expect((await fetch(`${base}/dashboard/parts/tasks`, { headers: { Cookie: cookie } })).status).toBe(200);
    expect((await fetch(`${base}/api/tasks`, { headers: { Cookie: cookie } })).status).toBe(401);

    const logout = await post(`${base}/dashboard/logout`, {}, { cookie, origin: base });
    expect(logout.status).toBe(303);
    expect(logout.headers.getSetCookie()[0]).toMatch(/^klym_session=; Max-Age=0/);
    expect((await fetch(`${base}/`, { headers: { Cookie: cookie }, redirect: 'manual' })).status).toBe(303);
    expect((await fetch(`${base}/dashboard/parts/tasks`, { headers: { Cookie: cookie } })).status).toBe(401);
    expect((await fetch(`${base}/dashboard/parts/upstreams`)).status).toBe(401);
  });
});

describe('the dashboard without tokens (loopback)', () => {
  it('has no login: everyone is anonymous and sees the list', async () => {
    harness = await startHarness({ tasks: { run: floodingRunner(0) } });
    const base = harness.server.url;
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    const body = await page.text();
    expect(body).toContain('<span class="principal">anonymous</span>');
    expect(body).not.toContain('Log out');
    const login = await fetch(`${base}/dashboard/login`, { redirect: 'manual' });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/');
  });

  it('answers a bad status filter or cursor with a page that says what was wrong', async () => {
    harness = await startHarness({ tasks: { run: floodingRunner(0) } });
    const base = harness.server.url;
    const status = await fetch(`${base}/?status=done`);
    expect(status.status).toBe(400);
    expect(await status.text()).toContain('`status`: expected one of pending, running, input_required, completed, error, cancelled, got &quot;done&quot;');
    const cursor = await fetch(`${base}/?cursor=nonsense`);
    expect(cursor.status).toBe(400);
    expect(await cursor.text()).toContain('not a cursor this list gave');
  });
});
