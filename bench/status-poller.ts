// Grynya's polls, from a process of their own as Grynya's would be: `check_task_status` on the task the
// parent names (IPC `{ taskId }`), every 20 ms, on its own MCP session; on `stop` it answers the round
// trips it measured, each with when it began (milliseconds since the epoch, to compare across processes).
// Run in its own process, the figures hold no queueing in the benchmark's client, which is busy starting
// tasks.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const poller = new Client({ name: 'bench-poller', version: '1.0.0' });
await poller.connect(new StreamableHTTPClientTransport(new URL(process.argv[2] ?? '')));
let latest: string | undefined;
const stopping = new AbortController();
const times: number[] = [];
const began: number[] = [];
process.on('message', (message: { taskId?: string; stop?: boolean }) => {
  if (message.taskId !== undefined) latest = message.taskId;
  if (message.stop === true) stopping.abort();
});
process.send?.({ ready: true });
while (!stopping.signal.aborted) {
  if (latest !== undefined) {
    const asked = performance.now();
    await poller.callTool({ name: 'check_task_status', arguments: { task_id: latest } });
    times.push(performance.now() - asked);
    began.push(performance.timeOrigin + asked);
  }
  await new Promise((resolve) => setTimeout(resolve, 20));
}
await poller.close();
process.send?.({ times, began }, () => process.exit(0));
