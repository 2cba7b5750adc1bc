import type { HttpBindings } from '@hono/node-server';
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';

/**
 * Hono's `bodyLimit`, without what it costs on `@hono/node-server` when the request declares its length.
 * Hono's check reads `c.req.raw.body` before it looks at `Content-Length`, and on the Node server that getter
 * builds a whole WHATWG `Request` with a web stream over the socket for each POST: ~20 KB, and about a third
 * of the serving thread's CPU while a burst of starts arrives (#12), for a stream the handlers never read
 * (they read the body directly). So a request Node parsed is checked from its `Content-Length` (Node has
 * already refused a malformed one, and reads no more than it declares); without that header and without
 * `Transfer-Encoding`, an HTTP/1.1 request has no body. A chunked body, or a request that did not come
 * through Node (`app.request()`), goes through Hono's check, which counts the bytes as they arrive.
 */
export function limitBody(maxSize: number, onError: (c: Context) => Response | Promise<Response>): MiddlewareHandler<{ Bindings: Partial<HttpBindings> }> {
  const counted = bodyLimit({ maxSize, onError });
  return async (c, next) => {
    const headers = c.env?.incoming?.headers;
    if (headers === undefined || headers['transfer-encoding'] !== undefined) return counted(c, next);
    const length = headers['content-length'];
    if (length !== undefined && Number(length) > maxSize) return onError(c);
    return next();
  };
}
