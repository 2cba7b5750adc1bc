import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isKlymError, KlymError, type KlymErrorCode, type TaskReply, type TaskService, type TaskStore } from '@klym/core';
import { TASK_DEFAULTS, createRedactor, viewSlice } from '@klym/core/server';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { html } from 'hono/html';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { serverSecrets, type ResolvedServerOptions } from '../server/server-options.ts';
import type { CallTotals } from '../metrics/klym-metrics.ts';
import { otherPrincipalsUse, principalNames, readNamedUse } from '../metrics/principal-use.ts';
import { createDashboardAuth, isSameOrigin, type DashboardAuthOptions, type DashboardVariables } from './dashboard-auth.ts';
import { createDashboardTasks, mayChange, parseStatus } from './dashboard-tasks.ts';
import { buildTimeline } from './timeline.ts';
import type { Html } from './views/format.ts';
import { layout, messagePage, type LayoutOptions } from './views/layout.ts';
import { loginForm } from './views/login.ts';
import { statusFilter, taskListPart, type TaskListQuery } from './views/task-list.ts';
import { principalsPart, type PrincipalsData } from './views/principals.ts';
import { logRows, logSection, taskPart, type TaskPageData } from './views/task-page.ts';
import { upstreamsPart } from './views/upstreams.ts';
import { ARTIFACT_PAGE_LINES, ARTIFACT_PAGE_TOKENS, artifactPage } from './views/artifact-page.ts';

/** Options of {@link createDashboard}. */
export interface DashboardOptions {
  readonly service: TaskService;
  /** The service's store: an admin's list and look-ups read every principal's tasks there. */
  readonly store: TaskStore;
  /** The server's options: its tokens and admins, secrets, log, and where tasks run. */
  readonly options: ResolvedServerOptions;
  readonly auth?: DashboardAuthOptions;
  /**
   * The calls this process made to each upstream, its runner thread's included (the server's metrics):
   * the upstreams page counts them instead of the main pool's own, which a thread's runs never use.
   */
  readonly callTotals?: () => ReadonlyMap<string, CallTotals>;
}

type Env = { Variables: DashboardVariables };

const STATUS_OF: Partial<Record<KlymErrorCode, ContentfulStatusCode>> = {
  TASK_NOT_FOUND: 404,
  ARTIFACT_NOT_FOUND: 404,
  INVALID_ARGUMENT: 400,
  TASK_NOT_WAITING: 409,
  SHUTTING_DOWN: 503,
  STORE_UNAVAILABLE: 503,
};

/** Pages run only the dashboard's own script and style; no other site may frame them, or be posted to from them. */
const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

const pageHeaders: MiddlewareHandler = async (c, next) => {
  await next();
  for (const [name, value] of Object.entries(PAGE_HEADERS)) c.res.headers.set(name, value);
};

const asset = (name: string): string => readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');

/**
 * The reply a task page's form sends: `answer` (a question's), or `decision` (`approve` or `deny`) with an
 * optional `reason` (an approval's). @throws {KlymError} `INVALID_ARGUMENT` naming the field that is wrong
 */
function replyOfForm(form: Record<string, unknown>): TaskReply {
  const field = (name: string): string | undefined => (typeof form[name] === 'string' ? (form[name] as string) : undefined);
  const answer = field('answer');
  const decision = field('decision');
  if (answer !== undefined) {
    if (answer.trim() === '') throw new KlymError('INVALID_ARGUMENT', '`answer`: write an answer before sending it');
    return { answer };
  }
  if (decision !== 'approve' && decision !== 'deny')
    throw new KlymError('INVALID_ARGUMENT', '`decision`: expected "approve" or "deny" (or an `answer` to a question)');
  const reason = field('reason')?.trim();
  return { approve: decision === 'approve', ...(reason === undefined || reason === '' ? {} : { reason }) };
}

/** A path to go back to after the login: only this server's own paths, so the form cannot send anyone elsewhere. */
const localPath = (next: string | undefined): string => (next !== undefined && /^\/(?![/\\])/.test(next) ? next : '/');

/**
 * Klym's web dashboard as a Hono app to mount at `/` (`app.route('/', …)`), behind the server's Host/Origin
 * guard: the task list (`/`, live, by status, newest first, paged), a task's timeline with its live log and
 * a Cancel button (`/dashboard/tasks/:id`), the upstreams (`/dashboard/upstreams`), and the quotas: tasks
 * running and waiting, spend today and limits per principal (`/dashboard/principals`). Pages are rendered on
 * the server (`hono/html`); `/dashboard/parts/…` renders the live pieces the page's script fetches again.
 * With `auth.tokens`, a login form (`/dashboard/login`) turns a token into a session cookie, and each
 * principal sees its own tasks and quota (an `auth.admins` principal every one's tasks, and every configured
 * principal's quota with the others' summed). A task waiting for input shows its question (or the call to
 * approve) and its owner answers it there (`/dashboard/tasks/:id/reply`). State-changing POSTs (login, logout,
 * cancel, reply) must come from the dashboard's own origin.
 */
export function createDashboard(dashboard: DashboardOptions): Hono<Env> {
  const { service, options } = dashboard;
  const auth = createDashboardAuth(options, dashboard.auth);
  const tasks = createDashboardTasks(service, dashboard.store);
  const redact = createRedactor(serverSecrets(options));
  const assets = { js: asset('dashboard.js'), css: asset('dashboard.css') };
  const assetVersion = createHash('sha256').update(assets.js).update(assets.css).digest('hex').slice(0, 10);
  const tasksRunHere = options.tasks.runner !== 'thread' && options.tasks.maxConcurrent !== 0;
  const app = new Hono<Env>();

  const frame = (c: Context<Env>, section?: LayoutOptions['section']): LayoutOptions => ({
    title: 'Klym',
    loginRequired: auth.required,
    assetVersion,
    ...(section === undefined ? {} : { section }),
    ...(c.get('viewer') === undefined ? {} : { viewer: c.get('viewer') }),
  });
  const render = (c: Context<Env>, body: Html, title: string, section?: LayoutOptions['section'], status: ContentfulStatusCode = 200) =>
    c.html(layout({ ...frame(c, section), title }, body), status);

  app.onError((error, c) => {
    const status = isKlymError(error) ? (STATUS_OF[error.code] ?? 500) : 500;
    if (status === 500)
      options.log(
        `klym: dashboard failed serving ${c.req.method} ${c.req.path}: ${redact.text(error instanceof Error ? error.message : String(error))}`,
        'error',
      );
    const heading = status === 404 ? 'Not found' : status === 400 ? 'Bad request' : status === 409 ? 'Not waiting' : 'Something went wrong';
    const message = isKlymError(error) ? redact.text(error.message) : `Klym failed serving ${c.req.path}`;
    return c.html(messagePage({ ...frame(c), title: heading }, heading, message), status);
  });

  // Only these paths: a sub-app's `use('*')` would reach every route of the app it is mounted on.
  for (const path of ['/', '/dashboard/*']) app.use(path, pageHeaders);

  app.get('/dashboard/assets/dashboard.js', (c) =>
    c.body(assets.js, 200, { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=31536000, immutable' }),
  );
  app.get('/dashboard/assets/dashboard.css', (c) =>
    c.body(assets.css, 200, { 'Content-Type': 'text/css; charset=utf-8', 'Cache-Control': 'public, max-age=31536000, immutable' }),
  );

  const forms = bodyLimit({ maxSize: 16_384, onError: (c) => c.text('The form is too large', 413) });
  const sameOrigin: MiddlewareHandler<Env> = async (c, next) => {
    if (!isSameOrigin(c))
      return c.html(messagePage({ ...frame(c), title: 'Refused' }, 'Refused', 'A dashboard form must be sent from the dashboard’s own page.'), 403);
    await next();
    return undefined;
  };
  for (const path of ['/dashboard/login', '/dashboard/logout', '/dashboard/tasks/:id/cancel', '/dashboard/tasks/:id/reply'])
    app.on('POST', path, forms, sameOrigin);

  app.get('/dashboard/login', (c) => (auth.required ? render(c, loginForm(localPath(c.req.query('next')), undefined), 'Log in') : c.redirect('/', 303)));
  app.post('/dashboard/login', async (c) => {
    if (!auth.required) return c.redirect('/', 303);
    const form = await c.req.parseBody();
    const next = localPath(typeof form.next === 'string' ? form.next : undefined);
    const token = typeof form.token === 'string' ? form.token.trim() : '';
    if (token === '' || auth.login(c, token) === undefined) return render(c, loginForm(next, 'That token is not valid.'), 'Log in', undefined, 401);
    return c.redirect(next, 303);
  });
  app.post('/dashboard/logout', (c) => {
    auth.logout(c);
    return c.redirect(auth.required ? '/dashboard/login' : '/', 303);
  });

  // Pages send a browser without a session to the login; the live parts answer 401, and the script reloads the page.
  const toLogin = auth.viewer((c) => c.redirect(`/dashboard/login?next=${encodeURIComponent(new URL(c.req.url).pathname + new URL(c.req.url).search)}`, 303));
  const partLogin = auth.viewer((c) => c.text('Log in again', 401));
  for (const path of ['/', '/dashboard/tasks/*', '/dashboard/upstreams', '/dashboard/principals']) app.use(path, toLogin);
  app.use('/dashboard/parts/*', partLogin);

  const listQuery = (c: Context<Env>): TaskListQuery => {
    const status = parseStatus(c.req.query('status'));
    const cursor = c.req.query('cursor') || undefined;
    return { ...(status === undefined ? {} : { status }), ...(cursor === undefined ? {} : { cursor }) };
  };
  const listPart = async (c: Context<Env>): Promise<Html> => {
    const query = listQuery(c);
    return taskListPart(await tasks.list(c.get('viewer'), query), query, c.get('viewer'));
  };
  app.get('/', async (c) =>
    render(
      c,
      html`<h1>Tasks</h1>
        ${statusFilter(listQuery(c).status)}${await listPart(c)}`,
      'Tasks',
      'tasks',
    ),
  );
  app.get('/dashboard/parts/tasks', async (c) => c.html(await listPart(c)));

  const taskData = async (c: Context<Env>): Promise<TaskPageData & { readonly log: Awaited<ReturnType<typeof tasks.wholeLog>> }> => {
    const id = c.req.param('id') as string;
    const caller = await tasks.callerFor(c.get('viewer'), id);
    const status = await service.status({ task_id: id, full_result: true }, caller.principal);
    const log = await tasks.wholeLog(id, caller);
    const waiting = status.status === 'input_required' ? (await service.tasks.get(id, caller)).input : undefined;
    return {
      status,
      principal: caller.principal,
      ...(waiting === undefined ? {} : { input: redact.value(waiting), mayAnswer: caller.principal === c.get('viewer').principal }),
      timeline: buildTimeline(log.entries),
      dropped: log.dropped,
      live: mayChange(status.status, status.write_back?.status),
      log,
    };
  };
  app.get('/dashboard/tasks/:id', async (c) => {
    const data = await taskData(c);
    return render(c, html`${taskPart(data)}${logSection(data.status.task_id, data.log, data.live)}`, `Task ${data.status.task_id.slice(0, 12)}`, 'tasks');
  });
  app.get('/dashboard/parts/tasks/:id', async (c) => c.html(taskPart(await taskData(c))));
  app.get('/dashboard/parts/tasks/:id/log', async (c) => {
    const id = c.req.param('id');
    const caller = await tasks.callerFor(c.get('viewer'), id);
    // The task first, then its log: entries written before it ended are all in the page that says it ended.
    const task = await service.tasks.get(id, caller);
    const after = Number(c.req.query('after') ?? 0);
    const page = await service.tasks.logs(id, caller, { after: Number.isSafeInteger(after) && after >= 0 ? after : 0, limit: TASK_DEFAULTS.maxLogPageSize });
    const done = !mayChange(task.status, task.writeBack?.status) && !page.more;
    return c.html(logRows(page), 200, { 'X-Log-Cursor': String(page.nextCursor), ...(done ? { 'X-Log-Done': '1' } : {}) });
  });
  app.get('/dashboard/tasks/:id/artifacts/:artifact', async (c) => {
    const id = c.req.param('id');
    const caller = await tasks.callerFor(c.get('viewer'), id);
    const offset = Number(c.req.query('offset') ?? 0);
    const charOffset = Number(c.req.query('char_offset') ?? 0);
    // A person reads 200 lines a page, however many tokens they would cost a model.
    const slice = await service.tasks.readArtifact(id, caller, c.req.param('artifact'), {
      offset: Number.isSafeInteger(offset) && offset >= 0 ? offset : 0,
      ...(Number.isSafeInteger(charOffset) && charOffset > 0 ? { charOffset } : {}),
      limit: ARTIFACT_PAGE_LINES,
      pageTokens: ARTIFACT_PAGE_TOKENS,
    });
    return render(c, artifactPage(viewSlice(id, slice)), `Artifact ${slice.artifact.id}`, 'tasks');
  });
  app.post('/dashboard/tasks/:id/cancel', async (c) => {
    const id = c.req.param('id');
    const viewer = c.get('viewer');
    await service.tasks.cancel(id, await tasks.callerFor(viewer, id), `cancelled on the dashboard by ${viewer.principal}`);
    return c.redirect(`/dashboard/tasks/${encodeURIComponent(id)}`, 303);
  });

  // The owner's answer: as the task's own principal only (an admin sees the question, not the form), through
  // the manager's reply, whose rules (first reply wins, the right kind) every door shares.
  app.post('/dashboard/tasks/:id/reply', async (c) => {
    const id = c.req.param('id');
    const viewer = c.get('viewer');
    await service.tasks.reply(id, { principal: viewer.principal }, replyOfForm(await c.req.parseBody()));
    return c.redirect(`/dashboard/tasks/${encodeURIComponent(id)}`, 303);
  });

  const upstreams = (): Html =>
    upstreamsPart(redact.value(service.pool.status()), { tasksRunHere, ...(dashboard.callTotals === undefined ? {} : { callTotals: dashboard.callTotals() }) });
  app.get('/dashboard/upstreams', (c) =>
    render(
      c,
      html`<h1>Upstreams</h1>
        ${upstreams()}`,
      'Upstreams',
      'upstreams',
    ),
  );
  app.get('/dashboard/parts/upstreams', (c) => c.html(upstreams()));

  // A principal sees its own row, as `GET /api/quota` answers it; an admin every configured principal's,
  // and the others' (OAuth subjects, A2A agents) together, read as the metrics read them.
  const names = principalNames(options);
  const principals = async (c: Context<Env>): Promise<Html> => {
    const viewer = c.get('viewer');
    let data: PrincipalsData;
    if (viewer.admin) {
      const [rows, totals] = await Promise.all([readNamedUse(service, names), service.tasks.summary()]);
      data = { rows, others: otherPrincipalsUse(totals, rows), admin: true };
    } else {
      data = { rows: [await service.tasks.usage({ principal: viewer.principal })], admin: false };
    }
    return principalsPart(data);
  };
  app.get('/dashboard/principals', async (c) =>
    render(
      c,
      html`<h1>Quotas</h1>
        ${await principals(c)}`,
      'Quotas',
      'principals',
    ),
  );
  app.get('/dashboard/parts/principals', async (c) => c.html(await principals(c)));
  return app;
}
