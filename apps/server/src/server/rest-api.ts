import type { HttpBindings } from '@hono/node-server';
import { KlymError, type TaskService } from '@klym/core';
import {
  parseArgs,
  replyTaskSchema,
  cancelTaskSchema,
  checkTaskSchema,
  listTasksSchema,
  queryArtifactsSchema,
  readArtifactSchema,
  startTaskSchema,
  taskLogsSchema,
} from '@klym/core/server';
import type { Hono } from 'hono';
import type { GuardVariables } from './guards.ts';

type Env = { Bindings: Partial<HttpBindings>; Variables: GuardVariables };

/** A query parameter as a number when it looks like one (the route's schema then checks it), else as given. */
const numeric = (value: string | undefined): number | string | undefined => (value === undefined ? undefined : /^\d+$/.test(value) ? Number(value) : value);
const flag = (value: string | undefined): boolean | string | undefined =>
  value === undefined ? undefined : value === 'true' ? true : value === 'false' ? false : value;
/** A request's JSON body. @throws {KlymError} `INVALID_ARGUMENT` when it is not JSON */
async function jsonBody(request: Request): Promise<unknown> {
  try {
    return await request.json();
  } catch {
    throw new KlymError('INVALID_ARGUMENT', '`body`: not valid JSON');
  }
}
const defined = (record: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));

/**
 * The task operations as a small REST API under `/api`, with the same auth and ownership as the MCP
 * tools and the same JSON: `POST /api/tasks`, `GET /api/tasks?status=&cursor=&limit=`, `GET /api/tasks/:id`
 * (`?full_result=true&log_after=&max_log_entries=`), `GET /api/tasks/:id/logs?after=&limit=`,
 * `GET /api/tasks/:id/artifacts/:artifact?offset=&char_offset=&limit=&original=`, `GET /api/tasks/:id/artifacts/:artifact/original`
 * (the result as its tool gave it, whole and byte for byte), `POST /api/tasks/:id/query` (`{ "sql": … }`),
 * `POST /api/tasks/:id/reply` (`{ answer }`, or `{ approve, reason? }` for an approval), `POST /api/tasks/:id/cancel`, and `GET /api/quota` (the caller's quotas and its tasks running and waiting). Each route parses its body or query once, with the schema the MCP tools
 * give the SDK: an unknown or bad field is a 400 naming it. Errors answer `{ error: { code, message } }`
 * through the app's `onError`.
 */
export function mountRestApi(app: Hono<Env>, service: TaskService): void {
  app.post('/api/tasks', async (c) => c.json(await service.start(parseArgs(startTaskSchema, await jsonBody(c.req.raw)), c.get('principal')), 202));
  app.get('/api/tasks', async (c) =>
    c.json(
      await service.list(
        parseArgs(listTasksSchema, defined({ status: c.req.query('status'), cursor: c.req.query('cursor'), limit: numeric(c.req.query('limit')) })),
        c.get('principal'),
      ),
    ),
  );
  app.get('/api/tasks/:id', async (c) =>
    c.json(
      await service.status(
        parseArgs(
          checkTaskSchema,
          defined({
            task_id: c.req.param('id'),
            full_result: flag(c.req.query('full_result')),
            log_after: numeric(c.req.query('log_after')),
            max_log_entries: numeric(c.req.query('max_log_entries')),
          }),
        ),
        c.get('principal'),
      ),
    ),
  );
  app.get('/api/tasks/:id/logs', async (c) =>
    c.json(
      await service.logs(
        parseArgs(taskLogsSchema, defined({ task_id: c.req.param('id'), after: numeric(c.req.query('after')), limit: numeric(c.req.query('limit')) })),
        c.get('principal'),
      ),
    ),
  );
  app.get('/api/tasks/:id/artifacts/:artifact', async (c) =>
    c.json(
      await service.readArtifact(
        parseArgs(
          readArtifactSchema,
          defined({
            task_id: c.req.param('id'),
            artifact: c.req.param('artifact'),
            offset: numeric(c.req.query('offset')),
            char_offset: numeric(c.req.query('char_offset')),
            limit: numeric(c.req.query('limit')),
            original: flag(c.req.query('original')),
          }),
        ),
        c.get('principal'),
      ),
    ),
  );
  app.get('/api/tasks/:id/artifacts/:artifact/original', async (c) => {
    const { artifact, text } = await service.tasks.artifactOriginal(c.req.param('id'), { principal: c.get('principal') }, c.req.param('artifact'));
    const json = artifact.records !== undefined && artifact.records.originalBytes > 0;
    return c.body(text, 200, { 'content-type': json ? 'application/json; charset=utf-8' : 'text/plain; charset=utf-8' });
  });
  app.post('/api/tasks/:id/query', async (c) => {
    const body = await jsonBody(c.req.raw);
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new KlymError('INVALID_ARGUMENT', '`body`: expected a JSON object `{ "sql": … }`');
    // A caller that goes away interrupts its query: Hono's request signal aborts when the connection closes.
    return c.json(
      await service.queryArtifacts(parseArgs(queryArtifactsSchema, { ...body, task_id: c.req.param('id') }), c.get('principal'), { signal: c.req.raw.signal }),
    );
  });
  app.post('/api/tasks/:id/reply', async (c) => {
    const body = await jsonBody(c.req.raw);
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new KlymError('INVALID_ARGUMENT', '`body`: expected a JSON object, `{ "answer": … }` or `{ "approve": true|false, "reason": … }`');
    if ('task_id' in body) throw new KlymError('INVALID_ARGUMENT', '`task_id`: the task is the one in the path; leave it out of the body');
    return c.json(await service.reply(parseArgs(replyTaskSchema, { ...body, task_id: c.req.param('id') }), c.get('principal')));
  });
  app.post('/api/tasks/:id/cancel', async (c) => c.json(await service.cancel(parseArgs(cancelTaskSchema, { task_id: c.req.param('id') }), c.get('principal'))));
  app.get('/api/quota', async (c) => c.json(await service.quota(c.get('principal'))));
}
