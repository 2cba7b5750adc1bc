import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport, type McpServer } from '@modelcontextprotocol/server';

/** Grynya's SDK client (1.x) connected to a v2 SDK `server` over the v2 SDK's linked in-memory transports; the caller closes it. */
export async function connectInMemory(server: McpServer): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'grynya', version: '1.0.0' });
  await client.connect(clientSide);
  return client;
}
