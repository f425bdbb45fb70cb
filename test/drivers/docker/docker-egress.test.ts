import { afterAll, beforeAll, expect, it } from "vitest";
import type { DockerWorkspaceHandle } from "@/server/workspace/drivers/docker/docker-containers";
import type { EgressRefusal } from "@/server/workspace/egress/egress-proxy";
import type { EgressLease } from "@/server/workspace/egress/machine-egress";
import { startEgressTarget } from "@/test/support/egress-target";
import { createDockerTestbed, describeDocker } from "./support/docker-env";

const SECRET = `docker-secret-${Date.now()}`;

/** A request through the proxy the command's environment names, with node (what every image has). */
const fetchThroughProxy = (url: string) => [
  "node",
  "-e",
  `const u = new URL(process.env.HTTP_PROXY);
   const auth = Buffer.from(decodeURIComponent(u.username) + ":" + decodeURIComponent(u.password)).toString("base64");
   require("http").get({ host: u.hostname, port: u.port, path: process.argv[1],
     headers: { "proxy-authorization": "Basic " + auth, authorization: "Bearer " + process.env.API_TOKEN } },
     (r) => { let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => console.log(r.statusCode, b.trim())); })
   .on("error", (e) => { console.log("error", e.message); process.exit(1); });`,
  url,
];

/** Egress of the Docker backend: the container keeps network `none`; the forwarder relays to the host proxy. */
describeDocker("Docker machine: egress through the host proxy", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  let ws: DockerWorkspaceHandle;
  let allowed: Awaited<ReturnType<typeof startEgressTarget>>;
  let other: Awaited<ReturnType<typeof startEgressTarget>>;
  let lease: EgressLease;
  const refusals: EgressRefusal[] = [];

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    ws = await testbed.open(testbed.newContainers());
    allowed = await startEgressTarget();
    other = await startEgressTarget();
    lease = await ws.backend.openEgress({
      policy: { mode: "allowlist", allow: [{ host: "127.0.0.1", ports: [allowed.port] }] },
      secrets: [{ name: "api-token", value: SECRET, hosts: ["127.0.0.1"] }],
      onRefused: (refusal) => refusals.push(refusal),
    });
  }, 600_000);
  afterAll(async () => {
    lease?.close();
    await testbed?.cleanup();
    await allowed?.close();
    await other?.close();
  });

  it("has no proxy without the grant, and the allow-listed request works with it", async () => {
    const bare = await ws.backend.exec(["/bin/sh", "-c", "env | grep -ci _proxy || true"]);
    expect(bare.stdout.toString().trim()).toBe("0");
    expect((await ws.backend.container.inspect()).HostConfig.NetworkMode).toBe("none");

    const env = { ...lease.env, API_TOKEN: "berth-secret://api-token" };
    const ok = await ws.backend.exec(fetchThroughProxy(`http://127.0.0.1:${allowed.port}/docker`), { env });
    expect(ok.stdout.toString()).toContain("200 hello from the host (/docker)");
    expect(allowed.received.at(-1)?.headers.authorization).toBe(`Bearer ${SECRET}`);

    const refused = await ws.backend.exec(fetchThroughProxy(`http://127.0.0.1:${other.port}/nope`), { env });
    expect(refused.stdout.toString()).toMatch(/^403 Berth egress proxy refused/);
    expect(other.received).toHaveLength(0);
    expect(refusals.at(-1)).toMatchObject({ port: other.port, reason: "host_not_allowed" });

    const look = await ws.backend.exec(
      ["/bin/sh", "-c", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"],
      { env },
    );
    expect(look.stdout.toString()).not.toContain(SECRET);
  });
});
