import fs from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { createGzip } from "node:zlib";
import tar from "tar-stream";
import { afterAll, beforeAll, expect, it } from "vitest";
import { attachThrough } from "@/server/workspace/drivers/driver";
import { DockerAttacher } from "@/server/workspace/drivers/docker/docker-attacher";
import type { DockerCreateEvent } from "@/server/workspace/drivers/docker/docker-containers";
import { WorkspaceManager } from "@/server/workspace/manager/workspace-manager";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import {
  copyPackageClosure,
  createDockerTestbed,
  describeDocker,
  libraryDockerDriver,
  TEST_OWNER,
  uniqueWorkspaceId,
} from "./support/docker-env";

/**
 * The Docker driver's attacher behind the engine's real WorkspaceManager and Workspace (as a library user
 * without workers holds it: closing stops the container): everything a restart of the API or worker process
 * does is simulated by building NEW attacher and manager objects.
 */
describeDocker(
  "Docker workspaces through WorkspaceManager: stop, reattach, dead-container recovery, purge",
  () => {
    let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
    const workspaceId = uniqueWorkspaceId("life");
    const address = { tenantId: TEST_OWNER.tenantId, userId: TEST_OWNER.userId, workspaceId };
    const request = { ...address, agentId: TEST_OWNER.agentId };
    const managers: WorkspaceManager[] = [];

    const newManager = (events: DockerCreateEvent[] = []) => {
      const docker = new DockerAttacher(testbed.newContainers(), {
        onProgress: (_spec, event) => events.push(event),
      });
      const driver = libraryDockerDriver(docker);
      const manager = new WorkspaceManager({
        attacher: attachThrough(driver),
        evictIntervalMs: null,
        livenessIntervalMs: 0,
      });
      managers.push(manager);
      return { docker, driver, manager };
    };

    beforeAll(async () => {
      testbed = await createDockerTestbed();
      testbed.track(address);
    });
    afterAll(async () => {
      for (const manager of managers) await manager.closeAll().catch(() => undefined);
      await testbed?.cleanup();
    });

    it("creates on first use, runs the builtin tools in the container, stops on close and reattaches after a restart", async () => {
      const events: DockerCreateEvent[] = [];
      const first = newManager(events);
      const workspace = await first.manager.getWorkspace(request);
      expect(workspace.isolated).toBe(true);
      expect(workspace.workdir).toBe("/workspace");
      // Commands run before the gateway is up; its "ready" follows once it answers.
      await first.docker.handleOf(workspace.machine)!.gateway.ready;
      expect(events.map((event) => event.type)).toEqual(["image", "container", "gateway", "gateway"]);
      expect(events).toContainEqual(expect.objectContaining({ type: "container", state: "created" }));

      // H1's builtin tools over the Docker backend.
      const tools = Object.fromEntries(
        workspace.listTools({ readState: null }).map((tool) => [tool.name, tool]),
      );
      expect(
        (await tools.Write!.execute({ file_path: "/workspace/notes/todo.md", content: "keep me\n" })).isError,
      ).toBe(false);
      const bash = await tools.Bash!.execute({ command: "cat notes/todo.md; id -un" });
      expect(bash.content).toContain("keep me");
      expect(bash.content).toContain("berth");
      const read = await tools.Read!.execute({ file_path: "/workspace/notes/todo.md" });
      expect(read.content).toContain("keep me");
      const grep = await tools.Grep!.execute({
        pattern: "keep",
        path: "/workspace/notes",
        output_mode: "content",
      });
      expect(grep.content).toContain("keep me");
      const glob = await tools.Glob!.execute({ pattern: "**/*.md" });
      expect(glob.content).toContain("notes/todo.md");

      const handle = first.docker.handleOf(workspace.machine)!;
      const containerId = (await handle.backend.container.inspect()).Id;
      await first.manager.close(address);
      const stopped = await testbed.docker.getContainer(handle.containerName).inspect();
      expect(stopped.State.Running).toBe(false);
      expect(await fs.readFile(path.join(handle.hostWorkdir, "notes/todo.md"), "utf8")).toBe("keep me\n");

      // "Restart": brand-new attacher and manager objects find the same container and data.
      const restartEvents: DockerCreateEvent[] = [];
      const second = newManager(restartEvents);
      const again = await second.manager.getWorkspace(request);
      expect(restartEvents).toContainEqual(
        expect.objectContaining({ type: "container", state: "reattached" }),
      );
      expect(restartEvents).toContainEqual(expect.objectContaining({ type: "image", phase: "cached" }));
      const reattached = second.docker.handleOf(again.machine)!;
      expect((await reattached.backend.container.inspect()).Id).toBe(containerId);
      const cat = await again.machine.exec(["cat", "notes/todo.md"]);
      expect(cat.stdout.toString()).toBe("keep me\n");
      // Every initialise mints a new gateway token: once the new gateway runs, the old client is refused.
      await reattached.gateway.ready;
      await expect(handle.gateway.client.listMcps({ agentId: "", sessionId: "" })).rejects.toMatchObject({
        code: "UNAUTHORIZED",
      });
    });

    it("installs a skill archive into the container through the workspace's SkillStore", async () => {
      const { manager } = newManager();
      const workspace = await manager.getWorkspace(request);
      const pack = tar.pack();
      pack.entry(
        { name: "hello-skill/SKILL.md" },
        "---\nname: hello\ndescription: Says hello\n---\nRun ./hello.sh\n",
      );
      pack.entry({ name: "hello-skill/hello.sh", mode: 0o755 }, "#!/bin/sh\necho hello from the skill\n");
      pack.finalize();
      const installed = await workspace.addSkillArchive(
        Readable.from(pack).pipe(createGzip()),
        "tar.gz",
        "agent-test",
      );
      expect(installed.skill.name).toBe("hello");
      const listing = await workspace.listSkills("agent-test");
      expect(listing.skills.map((skill) => skill.name)).toContain("hello");
      const run = await workspace.machine.exec([
        "sh",
        "-c",
        `cd ${installed.skill.path} && ./hello.sh && stat -c %U hello.sh`,
      ]);
      expect(run.stdout.toString()).toBe("hello from the skill\nberth\n");
    });

    it("MCP servers added through the Workspace run behind the gateway, like local ones", async () => {
      const { manager, docker } = newManager();
      const workspace = await manager.getWorkspace(request);
      const hostWorkdir = docker.handleOf(workspace.machine)!.hostWorkdir;
      const packageDir = await copyPackageClosure(
        "@modelcontextprotocol/server-everything",
        path.join(hostWorkdir, ".fixtures"),
      );
      const script = path.posix.join("/workspace", path.relative(hostWorkdir, packageDir), "dist/index.js");
      const scope = { agentId: "agent-test", sessionId: "s1" };
      await workspace.addMcp(
        ZMcpDeclaration.parse({
          name: "everything",
          is_stateful: true,
          mcp_config: { type: "stdio_mcp", command: "node", args: [script, "stdio"] },
        }),
        scope,
      );
      const descriptors = await workspace.listMcpTools(scope);
      const echo = descriptors.find((descriptor) => descriptor.toolName === "echo")!;
      expect(echo.name).toBe("mcp__everything__echo");
      expect(await echo.call({ message: "via workspace" })).toMatchObject({
        content: [{ type: "text", text: "Echo: via workspace" }],
      });
    });

    it("detects a killed container and replaces it on the next use, keeping the data", async () => {
      const { manager, docker } = newManager();
      const workspace = await manager.getWorkspace(request);
      const handle = docker.handleOf(workspace.machine)!;
      await workspace.machine.writeFile("survivor.txt", "still here");
      await testbed.docker.getContainer(handle.containerName).kill();
      expect(await workspace.isAlive()).toBe(false);

      const next = await manager.getWorkspace(request);
      expect(next).not.toBe(workspace);
      expect(await next.isAlive()).toBe(true);
      const cat = await next.machine.exec(["cat", "survivor.txt"]);
      expect(cat.stdout.toString()).toBe("still here");
      const health = await docker.handleOf(next.machine)!.gateway.client.health();
      expect(health.instance_nonce).not.toBe(handle.gateway.instanceNonce);
    });

    it("purge removes the container and the data", async () => {
      const { docker, driver } = newManager();
      const spec = { ...request, isolation: "per_agent" } as const;
      const backend = await docker.attach(spec);
      const handle = docker.handleOf(backend)!;
      await backend.writeFile("doomed.txt", "bye");
      await driver.purge(spec);
      await expect(testbed.docker.getContainer(handle.containerName).inspect()).rejects.toMatchObject({
        statusCode: 404,
      });
      await expect(fs.stat(handle.hostWorkdir)).rejects.toMatchObject({ code: "ENOENT" });
      // Purging again is a no-op.
      await docker.workspaces.purge(handle.ref);
    });
  },
);
