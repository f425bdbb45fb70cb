import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import { openExec, V5_PROTOCOL, type ExecChannel } from "./kube-exec";
import type { KubeClient } from "./kube-client";
import type { ExecTarget } from "./kube-exec";

/** Runs in the gateway container: joins the exec's stdio to the gateway's unix socket. */
const RELAY = [
  "const s=require('net').connect(process.argv[1]);",
  "s.on('error',e=>{process.stderr.write(String(e));process.exit(1)});",
  "s.on('close',()=>process.exit(0));process.stdin.on('end',()=>s.end());",
  "process.stdin.pipe(s);s.pipe(process.stdout);",
].join("");

/**
 * A local unix socket whose every connection is one exec session into the Pod's gateway container,
 * relaying bytes to the gateway's own unix socket there: the host speaks plain HTTP to the gateway through
 * the API server (no Pod IP, no port the agent could reach). HTTP keep-alive makes one session serve many
 * requests. The socket lives in a 0700 folder of this process only.
 */
export class ExecTunnel {
  private readonly channels = new Set<ExecChannel>();
  private readonly connections = new Set<net.Socket>();

  private constructor(
    readonly socketPath: string,
    private readonly server: net.Server,
  ) {}

  static async open(
    kube: KubeClient,
    target: ExecTarget,
    remoteSocket: string,
    dir: string,
  ): Promise<ExecTunnel> {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    await fs.chmod(dir, 0o700);
    const socketPath = path.join(dir, `${target.pod.slice(0, 40)}-${randomBytes(4).toString("hex")}.sock`);
    if (Buffer.byteLength(socketPath) > 107) {
      throw new AppError("INTERNAL", `tunnelDir is too long for unix socket paths: ${dir}`);
    }
    const server = net.createServer();
    const tunnel = new ExecTunnel(socketPath, server);
    server.on("connection", (connection) => tunnel.relay(kube, target, remoteSocket, connection));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => resolve());
    });
    server.unref();
    return tunnel;
  }

  private relay(kube: KubeClient, target: ExecTarget, remoteSocket: string, connection: net.Socket): void {
    connection.pause();
    this.connections.add(connection);
    connection.on("error", () => undefined);
    let channel: ExecChannel | null = null;
    void openExec(kube.kc, target, ["node", "-e", RELAY, remoteSocket], {
      stdin: true,
      sinks: {
        stdout: (chunk) => connection.write(chunk),
        stderr: () => true,
      },
    }).then(
      (opened) => {
        channel = opened;
        this.channels.add(opened);
        if (connection.destroyed) {
          opened.close();
          return;
        }
        connection.on("drain", () => opened.resume());
        void opened.done.then(() => {
          this.channels.delete(opened);
          connection.end();
        });
        connection.on("data", (chunk: Buffer) => {
          connection.pause();
          void opened.write(chunk).then(() => connection.resume());
        });
        connection.on("end", () => {
          // Only v5 can half-close; without it the session ends with the connection.
          if (opened.protocol === V5_PROTOCOL) opened.endStdin();
          else opened.close();
        });
        connection.on("close", () => opened.close());
        connection.resume();
      },
      () => connection.destroy(),
    );
    connection.on("close", () => {
      this.connections.delete(connection);
      channel?.close();
    });
  }

  async close(): Promise<void> {
    for (const channel of this.channels) channel.close();
    for (const connection of this.connections) connection.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await fs.rm(this.socketPath, { force: true });
  }
}
