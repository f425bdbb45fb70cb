import type { Metadata } from "next";
import { NotBuiltYet } from "@/app/_ui/not-built-yet";

export const metadata: Metadata = { title: "Workspaces" };

export default function WorkspacesPage() {
  return (
    <NotBuiltYet
      title="Workspaces"
      description="Workspace lifecycle, backends, leases and the events that explain why each one is alive or stopped."
    />
  );
}
