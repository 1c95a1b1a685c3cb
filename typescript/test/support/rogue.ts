/**
 * A misbehaving HTTP server on a real loopback socket (`node:net`), for the failures memkv never
 * produces: it reads each request in full, then does what the test asks (trickle an answer, flood
 * one, hang up). `close()` destroys every connection and stops listening.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export const GIB = 1024 ** 3;

export interface Rogue {
  url: string;
  /** Requests read in full so far. */
  readonly requests: number;
  /** Bytes written to clients so far (head and body). */
  readonly sent: number;
  close(): Promise<void>;
}

export type Behaviour = (socket: Socket, send: (data: Buffer | string) => Promise<boolean>, stopped: () => boolean) => Promise<void> | void;

export async function rogueServer(behave: Behaviour): Promise<Rogue> {
  const sockets = new Set<Socket>();
  let requests = 0;
  let sent = 0;
  let stopped = false;
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let data = Buffer.alloc(0);
    let served = false;
    socket.on('data', (chunk: Buffer) => {
      if (served) return;
      data = Buffer.concat([data, chunk]);
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(data.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (data.length < end + 4 + length) return;
      served = true;
      requests += 1;
      /** Writes `data`; resolves false once the client has gone (or the server stops). */
      const send = (chunk: Buffer | string): Promise<boolean> =>
        new Promise((resolve) => {
          if (stopped || socket.destroyed) {
            resolve(false);
            return;
          }
          socket.write(chunk, (error) => {
            if (!error) sent += Buffer.byteLength(chunk);
            resolve(!error && !socket.destroyed);
          });
        });
      void Promise.resolve(behave(socket, send, () => stopped)).catch(() => socket.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    get sent() {
      return sent;
    },
    close: async () => {
      stopped = true;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function head(headers: Record<string, string | number>): string {
  const lines = ['HTTP/1.1 200 OK', 'content-type: application/json'];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** A `total`-byte body as fast as the client takes it, announced or delimited by the connection's close. */
export function flood(announce: boolean, total = GIB): Behaviour {
  return async (socket, send) => {
    if (!(await send(head(announce ? { 'content-length': total } : { connection: 'close' })))) return;
    const piece = Buffer.alloc(65536, 'x');
    for (let i = 0; i < total / piece.length; i++) {
      if (!(await send(piece))) return;
    }
    socket.end();
  };
}

/** Headers at once, then one body byte every `everyMs`, each sent when the previous one is out. */
export function trickle(everyMs: number, length = 1000): Behaviour {
  return async (socket, send, stopped) => {
    if (!(await send(head({ 'content-length': length })))) return;
    for (let i = 0; i < length && !stopped(); i++) {
      await new Promise((resolve) => setTimeout(resolve, everyMs));
      if (!(await send(' '))) return;
    }
  };
}

/** Closes the connection without a word once the request is read. */
export const hangUp: Behaviour = (socket) => {
  socket.destroy();
};
