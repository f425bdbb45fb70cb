import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { BubblewrapMachine } from "@/server/workspace/drivers/bubblewrap/bubblewrap-machine";
import type { EgressGrant, EgressLease } from "@/server/workspace/egress/machine-egress";
import type { EgressRefusal } from "@/server/workspace/egress/egress-proxy";
import { startEgressTarget } from "@/test/support/egress-target";
import { describeSandbox, sandboxTestbed, specOf } from "./support/sandbox-env";

const SECRET = `s3cret-${Date.now()}-value`;

/**
 * Egress of the bubblewrap backend, driver level: a real sandbox, a real forwarder in front of the command,
 * the host's proxy, and loopback HTTP servers on the host as destinations.
 */
describeSandbox("bubblewrap sandbox: egress through the host proxy", () => {
  let testbed: Awaited<ReturnType<typeof sandboxTestbed>>;
  let machine: BubblewrapMachine;
  let allowed: Awaited<ReturnType<typeof startEgressTarget>>;
  let other: Awaited<ReturnType<typeof startEgressTarget>>;
  const refusals: EgressRefusal[] = [];
  let lease: EgressLease;

  const sh = (script: string, env: Record<string, string> = {}) =>
    machine.exec(["/bin/sh", "-c", script], { timeoutMs: 30_000, env });
  // NO_PROXY names 127.0.0.1 (the sandbox's own loopback); the host's is reached through the proxy explicitly.
  const curl = (args: string) => `curl -sS -m 10 --noproxy '' ${args}`;

  beforeAll(async () => {
    testbed = await sandboxTestbed();
    machine = await testbed.folders.attach(specOf("ws-egress"));
    allowed = await startEgressTarget();
    other = await startEgressTarget();
    const grant: EgressGrant = {
      policy: {
        mode: "allowlist",
        allow: [
          { host: "127.0.0.1", ports: [allowed.port] },
          { host: "localhost", ports: [allowed.port] },
        ],
      },
      secrets: [{ name: "api-token", value: SECRET, hosts: ["127.0.0.1"] }],
      onRefused: (refusal) => refusals.push(refusal),
    };
    lease = await machine.openEgress(grant);
  });

  afterAll(async () => {
    lease?.close();
    await machine?.close();
    await testbed?.cleanup();
    await allowed?.close();
    await other?.close();
  });

  it("without a grant a command has no proxy and no route to the host", async () => {
    const result = await sh(`env | grep -i _proxy; ${curl(`http://127.0.0.1:${allowed.port}/direct`)}`);
    expect(result.stdout.toString()).not.toMatch(/proxy/i);
    expect(result.exitCode).not.toBe(0);
    expect(allowed.received).toHaveLength(0);
  });

  it("with the grant an allow-listed request works; another loopback port is refused with 403 and counted", async () => {
    const ok = await sh(`${curl(`http://127.0.0.1:${allowed.port}/plain`)}`, lease.env);
    expect(ok.stderr.toString()).toBe("");
    expect(ok.stdout.toString()).toContain("hello from the host (/plain)");

    const refused = await sh(`${curl(`-w '%{http_code}' http://127.0.0.1:${other.port}/nope`)}`, lease.env);
    expect(refused.stdout.toString()).toMatch(/refused GET 127\.0\.0\.1:\d+: .*not on the allow-list.*403$/s);
    expect(other.received).toHaveLength(0);
    expect(refusals.at(-1)).toMatchObject({
      host: "127.0.0.1",
      port: other.port,
      reason: "host_not_allowed",
    });
  });

  it("tunnels CONNECT to an allowed host and refuses one to another port", async () => {
    const tunnel = await sh(`${curl(`-p http://127.0.0.1:${allowed.port}/tunnel`)}`, lease.env);
    expect(tunnel.stdout.toString()).toContain("(/tunnel)");
    const count = refusals.length;
    const refused = await sh(`${curl(`-p http://127.0.0.1:${other.port}/tunnel`)}`, lease.env);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr.toString()).toMatch(/403/);
    expect(refusals.length).toBe(count + 1);
    expect(refusals.at(-1)).toMatchObject({ method: "CONNECT", reason: "host_not_allowed" });
  });

  it("puts a secret's value into the headers toward its bound host only; the workspace never sees it", async () => {
    const env = { ...lease.env, API_TOKEN: "berth-secret://api-token" };
    const sent = await sh(
      `${curl(`-H "Authorization: Bearer $API_TOKEN" http://127.0.0.1:${allowed.port}/secret`)}`,
      env,
    );
    expect(sent.stdout.toString()).toContain("(/secret)");
    expect(allowed.received.at(-1)?.headers.authorization).toBe(`Bearer ${SECRET}`);

    const before = allowed.received.length;
    const unbound = await sh(
      `${curl(`-H "Authorization: Bearer $API_TOKEN" http://localhost:${allowed.port}/leak`)}`,
      env,
    );
    expect(unbound.stdout.toString()).toMatch(/secret api-token may not be sent to localhost/);
    expect(allowed.received.length).toBe(before);
    expect(refusals.at(-1)).toMatchObject({ reason: "secret_host_not_bound", secretNames: ["api-token"] });

    // Nowhere in the workspace: its environment, every process' environ, its files.
    const look = await sh(
      `env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; grep -r -F -l -e "${SECRET.slice(0, 6)}" /workspace /tmp || true`,
      env,
    );
    expect(look.stdout.toString()).not.toContain(SECRET);
    expect(look.stdout.toString()).toContain("berth-secret://api-token");
    for (const entry of await fs.readdir(machine.hostWorkdir, { recursive: true })) {
      const file = path.join(machine.hostWorkdir, entry);
      if ((await fs.stat(file)).isFile()) expect(await fs.readFile(file, "utf8")).not.toContain(SECRET);
    }
  });

  it("a closed lease gives no route any more", async () => {
    const env = lease.env;
    lease.close();
    const result = await sh(`${curl(`http://127.0.0.1:${allowed.port}/after`)}`, env);
    expect(result.exitCode).not.toBe(0);
  });
});
