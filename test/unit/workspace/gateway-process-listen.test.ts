import { spawn, type ChildProcessByStdio } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadGatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { GATEWAY_ENV } from "@/server/workspace/gateway/gateway-protocol";

/** The gateway bundle as a sandbox runs it (`node berth-gateway.cjs`), on a loopback port. */
describe("the gateway process listening on a fixed port", () => {
  let dir: string;
  let bundle: string;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-gw-listen-"));
    bundle = path.join(dir, "berth-gateway.cjs");
    await fs.writeFile(bundle, (await loadGatewayBundle()).code);
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));

  function startGateway(listen: string) {
    const child: ChildProcessByStdio<null, null, Readable> = spawn(process.execPath, [bundle], {
      env: {
        PATH: process.env.PATH,
        NODE_ENV: "test",
        [GATEWAY_ENV.listen]: listen,
        [GATEWAY_ENV.token]: "listen-test-token-0123456789",
        [GATEWAY_ENV.nonce]: "listen-test-nonce",
        [GATEWAY_ENV.workdir]: dir,
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    child.stderr.on("data", (chunk: Buffer) => (log += chunk.toString()));
    const logged = (text: string) =>
      new Promise<void>((resolve, reject) => {
        const check = () => log.includes(text) && resolve();
        child.stderr.on("data", check);
        child.on("exit", (code) => reject(new Error(`gateway exited ${code} before "${text}": ${log}`)));
        check();
      });
    return { child, logged, log: () => log, exited: once(child, "close") as Promise<[number | null]> };
  }

  async function heldPort(): Promise<net.Server> {
    const holder = net.createServer();
    holder.listen(0, "127.0.0.1");
    await once(holder, "listening");
    return holder;
  }

  it("waits for a port the previous gateway still holds, then listens on it", async () => {
    const holder = await heldPort();
    const { port } = holder.address() as net.AddressInfo;
    const gateway = startGateway(`tcp:127.0.0.1:${port}`);
    try {
      await gateway.logged("is busy; trying again");
      holder.close();
      await gateway.logged(`listening on tcp:127.0.0.1:${port}`);
      const socket = net.connect(port, "127.0.0.1");
      await once(socket, "connect");
      socket.destroy();
    } finally {
      holder.close();
      gateway.child.kill("SIGKILL");
    }
  });

  it("ends with exit code 1 and says why when it cannot listen at all", async () => {
    // 192.0.2.1 (TEST-NET-1) is no address of this machine: EADDRNOTAVAIL, nothing to wait for.
    const gateway = startGateway("tcp:192.0.2.1:5600");
    const [code] = await gateway.exited;
    expect(code).toBe(1);
    expect(gateway.log()).toMatch(/cannot listen on tcp:192\.0\.2\.1:5600: .*EADDRNOTAVAIL/);
  });
});
