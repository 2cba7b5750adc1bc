// A push notification receiver as an A2A client would run one: node:http on loopback, recording each request
// (its path, headers and body) and answering as the test says.
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { text } from 'node:stream/consumers';

/** One request the receiver got. */
export interface PushRequest {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** The body as JSON (`undefined` when it is not). */
  readonly json: unknown;
}

export interface PushReceiver extends AsyncDisposable {
  /** `http://127.0.0.1:<port>`: the receiver answers every path. */
  readonly origin: string;
  /** Every request, in order of arrival. */
  readonly requests: PushRequest[];
  /** The requests to `path`, in order. */
  to(path: string): PushRequest[];
  close(): Promise<void>;
}

/** Starts a receiver on 127.0.0.1 (a free port); `answer` decides each status (default 200). */
export async function startPushReceiver(answer: (request: PushRequest, index: number) => number = () => 200): Promise<PushReceiver> {
  const requests: PushRequest[] = [];
  const server = createServer(async (incoming, outgoing) => {
    const body = await text(incoming);
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      json = undefined;
    }
    const request: PushRequest = { path: incoming.url ?? '/', headers: incoming.headers, body, json };
    const index = requests.filter((earlier) => earlier.path === request.path).length;
    requests.push(request);
    outgoing.writeHead(answer(request, index)).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const close = async (): Promise<void> => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    to: (path) => requests.filter((request) => request.path === path),
    close,
    [Symbol.asyncDispose]: close,
  };
}
