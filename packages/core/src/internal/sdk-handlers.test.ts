import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { McpServer } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { currentHandler, installedVersionOf, replaceStdioReadBuffer, type StdioReadBuffer } from './sdk-handlers.ts';

const reader: StdioReadBuffer = { append: () => {}, readMessage: () => null, clear: () => {} };

describe('the reaches into the MCP SDK', () => {
  it('know the installed SDKs’ versions', () => {
    expect(installedVersionOf('@modelcontextprotocol/client')).toMatch(/^\d+\.\d+\.\d+/);
    expect(installedVersionOf('@modelcontextprotocol/server')).toMatch(/^\d+\.\d+\.\d+/);
    expect(installedVersionOf('@klym/no-such-package')).toBe('of an unknown version');
  });

  it('put the frame reader into the installed SDK’s stdio transport, as it is built', () => {
    const transport = new StdioClientTransport({ command: 'node' });
    replaceStdioReadBuffer(transport, reader);
    expect(Reflect.get(transport, '_readBuffer')).toBe(reader);
  });

  it('refuse a stdio transport without `_readBuffer`, naming the client SDK and its version', () => {
    const version = installedVersionOf('@modelcontextprotocol/client');
    for (const transport of [{}, { _readBuffer: undefined }, { _readBuffer: { append: () => {} } }]) {
      expect(() => replaceStdioReadBuffer(transport, reader)).toThrow(
        `The MCP SDK's StdioClientTransport reads its child's stdout otherwise than through \`_readBuffer\` in @modelcontextprotocol/client ${version}, which Klym was not built for: update packages/core/src/internal/sdk-handlers.ts`,
      );
      expect(Reflect.get(transport, '_readBuffer')).not.toBe(reader);
    }
  });

  it('refuse a server without `_requestHandlers`, naming the server SDK and its version', () => {
    const server = new McpServer({ name: 'probe', version: '1.0.0' });
    expect(currentHandler(server, 'initialize')).toBeTypeOf('function');
    const moved = { server: {} } as unknown as McpServer;
    expect(() => currentHandler(moved, 'tools/call')).toThrow(
      `elsewhere than \`_requestHandlers\` in @modelcontextprotocol/server ${installedVersionOf('@modelcontextprotocol/server')}, which Klym`,
    );
    expect(() => currentHandler(moved, 'tools/call')).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
  });
});
