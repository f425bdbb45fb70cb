/**
 * The gateway's TCP tunnel (protocol 4) on a real container: a preview of an app started by the machine's
 * exec is reached through the gateway's unix socket (not a container address: the network is `none`), one
 * plain HTTP GET over it; a port nothing listens on is a typed 502; a tunnel is refused by the
 * gateway without its token.
 */
import http from "node:http";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { DockerWorkspaceHandle } from "@/server/workspace/drivers/docker/docker-containers";
import { openGatewayTunnel } from "@/server/workspace/gateway/client/gateway-tunnel";
import { PREVIEW_APP } from "../../integration/preview/preview-server";
import { createDockerTestbed, describeDocker } from "./support/docker-env";

const APP_PORT = 8123;

describeDocker("preview tunnels through the Docker gateway", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  let ws: DockerWorkspaceHandle;
  const app = new AbortController();

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    ws = await testbed.open(testbed.newContainers());
    await new Promise<void>((resolve, reject) => {
      ws.backend
        .exec(["node", "-e", PREVIEW_APP, String(APP_PORT)], {
          signal: app.signal,
          onStdout: (chunk) => chunk.toString().includes("listening") && resolve(),
        })
        .then((result) => reject(new Error(`the app exited: ${result.stderr.toString()}`)), reject);
    });
  }, 180_000);
  afterAll(async () => {
    app.abort();
    await testbed?.cleanup();
  });

  it("GETs the app inside the container over a tunnel", async () => {
    const tunnel = await ws.backend.openTunnel(APP_PORT);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request({
        path: "/inside?y=1",
        headers: { host: `127.0.0.1:${APP_PORT}`, connection: "close" },
        createConnection: () => tunnel,
      });
      req.on("response", (res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      req.end();
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ path: "/inside?y=1", host: `127.0.0.1:${APP_PORT}` });
  });

  it("says nothing listens (502, typed); the gateway refuses a tunnel without its token", async () => {
    await expect(ws.backend.openTunnel(APP_PORT + 1)).rejects.toMatchObject({
      code: "BAD_GATEWAY",
      details: expect.objectContaining({ reason: "port_not_listening" }),
    });
    // Straight to the gateway with a wrong token: the token guards the tunnel like every route.
    const gateway = ws.gateway;
    await expect(
      openGatewayTunnel({ socketPath: gateway.socketPath }, "wrong-token", 80, { health: gateway.ready }),
    ).rejects.toMatchObject({ code: "UNAUTHORIZED" });
  });
});
