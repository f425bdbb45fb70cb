"use client";

import "@xterm/xterm/css/xterm.css";
import type { FitAddon } from "@xterm/addon-fit";
import type { Terminal } from "@xterm/xterm";
import { useCallback, useEffect, useRef, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent } from "@/app/_components/ui/card";
import { useTenantRole } from "../../_components/tenant-role";

type Status =
  | { kind: "connecting" }
  | { kind: "open"; terminalId: string }
  | { kind: "reconnecting"; attempt: number }
  | { kind: "ended"; message: string };

type ServerMessage =
  | { type: "ready"; terminalId: string; reattached: boolean }
  | { type: "exit"; exitCode: number }
  | { type: "error"; code: string; message: string };

const MAX_RECONNECTS = 5;

/**
 * An interactive shell in the workspace (xterm.js over the terminal WebSocket, server/api/terminal-socket.ts).
 * The server holds a workspace lease while it is open. A dropped connection reconnects to the SAME shell
 * (its id, with backoff) while the server keeps it; leaving the tab or the page says goodbye, which ends
 * the shell and releases the lease.
 */
export function WorkspaceTerminal({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  const { role, can } = useTenantRole(tenantSlug);
  const allowed = can("session:use", false);
  const [session, setSession] = useState(0);
  if (!allowed) {
    return (
      <Card>
        <CardContent className="text-muted-foreground text-sm" data-testid="terminal-role-note">
          {role ? `A terminal needs the member role; you are ${role}.` : "Checking your role…"}
        </CardContent>
      </Card>
    );
  }
  return (
    <TerminalView
      key={session}
      tenantSlug={tenantSlug}
      workspaceId={workspaceId}
      onRestart={() => setSession((n) => n + 1)}
    />
  );
}

function socketUrl(
  tenantSlug: string,
  workspaceId: string,
  size: { cols: number; rows: number },
  id?: string,
) {
  const url = new URL(`/api/workspaces/${encodeURIComponent(workspaceId)}/terminal`, window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.searchParams.set("tenantSlug", tenantSlug);
  url.searchParams.set("cols", String(size.cols));
  url.searchParams.set("rows", String(size.rows));
  if (id) url.searchParams.set("terminal", id);
  return url.toString();
}

function TerminalView({
  tenantSlug,
  workspaceId,
  onRestart,
}: {
  tenantSlug: string;
  workspaceId: string;
  onRestart: () => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState<Status>({ kind: "connecting" });
  const socket = useRef<WebSocket | null>(null);
  const send = useCallback((message: object) => {
    if (socket.current?.readyState === WebSocket.OPEN) socket.current.send(JSON.stringify(message));
  }, []);

  useEffect(() => {
    let disposed = false;
    let term: Terminal | null = null;
    let fit: FitAddon | null = null;
    let terminalId: string | undefined;
    let attempts = 0;
    let retry: ReturnType<typeof setTimeout> | null = null;
    let observer: ResizeObserver | null = null;

    const connect = () => {
      if (disposed || !term) return;
      const ws = new WebSocket(socketUrl(tenantSlug, workspaceId, term, terminalId));
      ws.binaryType = "arraybuffer";
      socket.current = ws;
      let ended = false;
      ws.onmessage = (event: MessageEvent<ArrayBuffer | string>) => {
        if (typeof event.data !== "string") {
          term?.write(new Uint8Array(event.data));
          return;
        }
        const message = JSON.parse(event.data) as ServerMessage;
        if (message.type === "ready") {
          terminalId = message.terminalId;
          attempts = 0;
          setStatus({ kind: "open", terminalId: message.terminalId });
          term?.focus();
        } else if (message.type === "exit") {
          ended = true;
          setStatus({ kind: "ended", message: `The shell exited (code ${message.exitCode}).` });
        } else {
          term?.write(`\r\n[${message.message}]\r\n`);
        }
      };
      ws.onclose = (event) => {
        if (disposed || ended || socket.current !== ws) return;
        if (event.code === 4409) {
          setStatus({ kind: "ended", message: "This terminal was opened in another tab." });
          return;
        }
        // Refused before the upgrade (role, state, an ended terminal) or gone for good: no retry storm.
        if (attempts >= MAX_RECONNECTS || (event.code === 1006 && !terminalId)) {
          setStatus({ kind: "ended", message: "The terminal could not connect (or has ended)." });
          return;
        }
        attempts += 1;
        setStatus({ kind: "reconnecting", attempt: attempts });
        retry = setTimeout(connect, Math.min(500 * 2 ** attempts, 8_000));
      };
    };

    void (async () => {
      const [{ Terminal: XTerm }, { FitAddon: Fit }] = await Promise.all([
        import("@xterm/xterm"),
        import("@xterm/addon-fit"),
      ]);
      if (disposed || !host.current) return;
      term = new XTerm({ cursorBlink: true, fontSize: 13, convertEol: false, scrollback: 5000 });
      fit = new Fit();
      term.loadAddon(fit);
      term.open(host.current);
      fit.fit();
      term.onData((data) => send({ type: "input", data }));
      term.onResize(({ cols, rows }) => send({ type: "resize", cols, rows }));
      observer = new ResizeObserver(() => fit?.fit());
      observer.observe(host.current);
      connect();
    })();

    // A closed tab or a page left: the goodbye ends the shell (and its lease) at once.
    const goodbye = () => {
      if (socket.current?.readyState === WebSocket.OPEN)
        socket.current.send(JSON.stringify({ type: "close" }));
    };
    window.addEventListener("pagehide", goodbye);
    return () => {
      disposed = true;
      window.removeEventListener("pagehide", goodbye);
      if (retry) clearTimeout(retry);
      observer?.disconnect();
      goodbye();
      socket.current?.close(1000);
      socket.current = null;
      term?.dispose();
    };
  }, [tenantSlug, workspaceId, send]);

  return (
    <div className="grid gap-2">
      <div className="flex items-center gap-3 text-sm" data-testid="terminal-status">
        {status.kind === "connecting" && <span className="text-muted-foreground">Connecting…</span>}
        {status.kind === "open" && <span className="text-muted-foreground">Connected</span>}
        {status.kind === "reconnecting" && (
          <span className="text-muted-foreground">Connection lost: reconnecting ({status.attempt})…</span>
        )}
        {status.kind === "ended" && (
          <>
            <Alert tone="info" className="py-1">
              {status.message}
            </Alert>
            <Button size="sm" variant="outline" onClick={onRestart}>
              Open a new terminal
            </Button>
          </>
        )}
      </div>
      <div
        ref={host}
        role="application"
        aria-label="Workspace terminal"
        data-testid="terminal"
        className="h-[28rem] w-full overflow-hidden rounded-md border bg-black p-1"
      />
    </div>
  );
}
