"use client";

import { Alert } from "@/app/_components/ui/alert";
import { CopyButton } from "@/app/_components/ui/copy-button";

/** An owner invitation link, shown once (only its hash is stored). */
export function InviteLinkBox({ path }: { path: string }) {
  const link = `${window.location.origin}${path}`;
  return (
    <div className="grid gap-3">
      <Alert tone="success">Owner invitation created. Copy the link now: it is shown only once.</Alert>
      <div className="flex items-center gap-1 rounded-md border p-1 pl-3">
        <code className="min-w-0 flex-1 truncate text-xs" data-testid="owner-invite-link">
          {link}
        </code>
        <CopyButton value={link} label="Copy invitation link" />
      </div>
    </div>
  );
}
