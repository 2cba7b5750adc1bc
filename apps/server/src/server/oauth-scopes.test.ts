import { describe, expect, it } from 'vitest';
import { operationsOf } from './oauth-scopes.ts';

const tool = (name: string) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } });
const request = (method: string) => ({ jsonrpc: '2.0', id: 1, method });

describe('operationsOf', () => {
  it('MCP: the tool decides a tools/call; tasks/* read or cancel; the protocol’s plumbing needs no scope', () => {
    for (const path of ['/mcp', '/messages']) {
      expect(operationsOf('POST', path, tool('start_async_agent_task'))).toEqual(['start']);
      expect(operationsOf('POST', path, tool('run_agent_task'))).toEqual(['start']);
      expect(operationsOf('POST', path, tool('cancel_agent_task'))).toEqual(['cancel']);
      for (const name of ['check_task_status', 'read_task_artifact', 'query_task_artifact', 'list_agent_tasks', 'describe_capabilities', 'no_such_tool'])
        expect(operationsOf('POST', path, tool(name))).toEqual(['read']);
      expect(operationsOf('POST', path, request('tasks/cancel'))).toEqual(['cancel']);
      for (const method of ['tasks/get', 'tasks/result', 'tasks/list', 'some/future-method'])
        expect(operationsOf('POST', path, request(method))).toEqual(['read']);
      for (const method of ['initialize', 'ping', 'tools/list', 'logging/setLevel', 'server/discover', 'notifications/initialized'])
        expect(operationsOf('POST', path, request(method))).toEqual([]);
      // 2026-07-28: tasks/update drives a run; a listen naming tasks reads them, one for list changes is plumbing.
      expect(operationsOf('POST', path, request('tasks/update'))).toEqual(['start']);
      expect(operationsOf('POST', path, { ...request('subscriptions/listen'), params: { notifications: { taskIds: ['t1'] } } })).toEqual(['read']);
      expect(operationsOf('POST', path, { ...request('subscriptions/listen'), params: { notifications: { toolsListChanged: true } } })).toEqual([]);
    }
    // A response to the server's own request, or a body that is not JSON-RPC (the route refuses it).
    expect(operationsOf('POST', '/mcp', { jsonrpc: '2.0', id: 7, result: {} })).toEqual([]);
    expect(operationsOf('POST', '/mcp', undefined)).toEqual([]);
    expect(operationsOf('POST', '/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 42 } })).toEqual(['read']);
  });

  it('A2A: sending and push configs that deliver start, a cancel cancels, the rest read', () => {
    for (const method of ['SendMessage', 'SendStreamingMessage', 'CreateTaskPushNotificationConfig', 'DeleteTaskPushNotificationConfig'])
      expect(operationsOf('POST', '/a2a', request(method))).toEqual(['start']);
    expect(operationsOf('POST', '/a2a', request('CancelTask'))).toEqual(['cancel']);
    for (const method of [
      'GetTask',
      'ListTasks',
      'SubscribeToTask',
      'GetTaskPushNotificationConfig',
      'ListTaskPushNotificationConfigs',
      'GetExtendedAgentCard',
      'SomeFutureMethod',
    ])
      expect(operationsOf('POST', '/a2a', request(method))).toEqual(['read']);
    // The same endpoint at `/a2a/`, where the conformance kit posts: the same scopes, not the REST default.
    expect(operationsOf('POST', '/a2a/', request('SendMessage'))).toEqual(['start']);
    expect(operationsOf('POST', '/a2a/', request('CancelTask'))).toEqual(['cancel']);
  });

  it('MCP: a batch needs each of its messages’ operations, once', () => {
    expect(operationsOf('POST', '/mcp', [tool('start_async_agent_task'), tool('check_task_status'), request('tasks/cancel'), tool('run_agent_task')])).toEqual([
      'start',
      'read',
      'cancel',
    ]);
  });

  it('the streams of a session need no scope; REST is decided by method and path', () => {
    expect(operationsOf('GET', '/mcp')).toEqual([]);
    expect(operationsOf('DELETE', '/mcp')).toEqual([]);
    expect(operationsOf('GET', '/sse')).toEqual([]);
    expect(operationsOf('POST', '/api/tasks')).toEqual(['start']);
    expect(operationsOf('POST', '/api/tasks/abc/cancel')).toEqual(['cancel']);
    // A follow-up query reads a task's evidence: it starts nothing.
    expect(operationsOf('POST', '/api/tasks/abc/query')).toEqual(['read']);
    for (const path of [
      '/api/tasks',
      '/api/tasks/abc',
      '/api/tasks/abc/logs',
      '/api/tasks/abc/artifacts/a1',
      '/api/tasks/abc/artifacts/a1/original',
      '/api/quota',
      '/metrics',
    ])
      expect(operationsOf('GET', path)).toEqual(['read']);
  });
});
