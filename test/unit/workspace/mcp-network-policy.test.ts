import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { createMcpAddressGuard, isPublicAddress } from "@/server/workspace/mcp/mcp-network-policy";
import { httpMcp, startHttpMcpServer, type TestHttpMcpServer } from "./support/mcp-servers";

const SCOPE = { agentId: "a", sessionId: "s" };

describe("MCP network policy", () => {
  let upstream: TestHttpMcpServer;
  beforeAll(async () => {
    upstream = await startHttpMcpServer();
  });
  afterAll(async () => {
    await upstream.close();
  });

  it("classifies loopback, link-local, private, CGNAT and mapped addresses as not public", () => {
    for (const address of [
      "127.0.0.1",
      "127.9.9.9",
      "10.0.0.1",
      "172.16.5.4",
      "192.168.0.10",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "::1",
      "::",
      "fe80::1",
      "fd00::1",
      "::ffff:127.0.0.1",
      "::ffff:10.0.0.1",
    ]) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    // An IPv6 transition form is as public as the IPv4 it carries: 6to4, Teredo (server and client).
    for (const address of [
      "93.184.216.34",
      "1.1.1.1",
      "2606:4700:4700::1111",
      "2002:5db8:d822::1",
      "2001:0:5db8:d822::a2ff:fffe",
    ]) {
      expect(isPublicAddress(address), address).toBe(true);
    }
  });

  it("checks every connection, not only the declaration: a loopback name is refused when dialled", async () => {
    // The declaration check is skipped here (the connector is used directly), as a DNS answer that changed
    // after the check would be: the socket's lookup still refuses the loopback address.
    const url = `http://localhost:${new URL(upstream.url).port}/mcp`;
    const guarded = new LocalMcpConnector({ network: { allowedHosts: [] } });
    const client = await guarded.connect(httpMcp("remote", url, false), SCOPE);
    await expect(client.listTools()).rejects.toThrow();
    expect(upstream.sessionsOpened).toBe(0);
    await client.close();
  });

  it("connects to an allowlisted host name, address or subnet", async () => {
    const port = new URL(upstream.url).port;
    for (const allowedHosts of [["localhost"], ["127.0.0.1", "::1"], ["127.0.0.0/8", "::1/128"]]) {
      const connector = new LocalMcpConnector({ network: { allowedHosts } });
      const client = await connector.connect(httpMcp("remote", `http://localhost:${port}/mcp`, false), SCOPE);
      expect((await client.listTools()).map((tool) => tool.name)).toContain("echo");
      await client.close();
    }
    await expect(
      createMcpAddressGuard({ allowedHosts: [] }).assertUrlAllowed(upstream.url),
    ).rejects.toMatchObject({
      code: "FORBIDDEN",
    });
    await expect(
      createMcpAddressGuard({ allowedHosts: ["127.0.0.1"] }).assertUrlAllowed(upstream.url),
    ).resolves.toBeUndefined();
  });
});
