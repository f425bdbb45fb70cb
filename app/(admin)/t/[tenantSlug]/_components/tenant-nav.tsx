"use client";

import {
  type LucideIcon,
  Activity,
  BookMarked,
  Bot,
  Gauge,
  KeyRound,
  LayoutDashboard,
  Menu,
  MessagesSquare,
  ScrollText,
  Server,
  Settings,
  Users,
  Webhook,
} from "lucide-react";
import { useState } from "react";
import { Brand } from "@/app/_components/brand";
import { Button } from "@/app/_components/ui/button";
import { Dialog, DialogContent, DialogTitle, DialogTrigger } from "@/app/_components/ui/dialog";
import { SideNav, type SideNavItem } from "@/app/_components/ui/side-nav";
import { roleCan, type TenantAction } from "@/server/auth/policy";
import type { TenantRole } from "@/server/auth/roles";

/** Each section with what its page reads: a role that may not read it is not offered the link. */
const SECTIONS: readonly { segment: string; label: string; icon: LucideIcon; needs: TenantAction }[] = [
  { segment: "", label: "Overview", icon: LayoutDashboard, needs: "tenant:read" },
  { segment: "agents", label: "Agents", icon: Bot, needs: "agent:read" },
  { segment: "sessions", label: "Sessions", icon: MessagesSquare, needs: "session:read" },
  { segment: "workspaces", label: "Workspaces", icon: Server, needs: "workspace:read" },
  { segment: "library", label: "Library", icon: BookMarked, needs: "library:read" },
  { segment: "jobs", label: "Jobs", icon: Activity, needs: "operations:read" },
  { segment: "readiness", label: "Readiness", icon: Gauge, needs: "operations:read" },
  { segment: "webhooks", label: "Webhooks", icon: Webhook, needs: "webhook:manage" },
  { segment: "audit", label: "Audit", icon: ScrollText, needs: "audit:read" },
  { segment: "api-keys", label: "API keys", icon: KeyRound, needs: "api-key:read" },
  { segment: "members", label: "Members", icon: Users, needs: "member:read" },
  { segment: "settings", label: "Settings", icon: Settings, needs: "tenant:read" },
];

/** The sections the caller's role may open (the API refuses the others with 403 anyway). */
export function TenantNav({
  tenantSlug,
  role,
  onNavigate,
}: {
  tenantSlug: string;
  role: TenantRole;
  onNavigate?: () => void;
}) {
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const visible = SECTIONS.filter((section) => roleCan(role, section.needs));
  const items = visible.map(({ segment, label, icon }): SideNavItem => {
    const href = segment ? `${base}/${segment}` : base;
    return {
      href,
      label,
      icon,
      isCurrent: (pathname) => (segment ? pathname.startsWith(href) : pathname === base),
    };
  });
  return <SideNav label="Tenant" items={items} onNavigate={onNavigate} />;
}

/** Below the `md` breakpoint the sidebar folds into a menu button that opens it as a sheet. */
export function MobileNav({
  tenantSlug,
  tenantName,
  role,
}: {
  tenantSlug: string;
  tenantName: string;
  role: TenantRole;
}) {
  const [open, setOpen] = useState(false);
  return (
    <Dialog open={open} onOpenChange={setOpen}>
      <DialogTrigger asChild>
        <Button variant="ghost" size="icon" aria-label="Open navigation" className="md:hidden">
          <Menu />
        </Button>
      </DialogTrigger>
      <DialogContent className="top-0 left-0 h-full max-h-none w-72 max-w-[80vw] translate-x-0 translate-y-0 content-start rounded-none border-r p-4">
        <DialogTitle className="sr-only">Navigation</DialogTitle>
        <Brand />
        <p className="text-muted-foreground -mt-2 text-xs">{tenantName}</p>
        <TenantNav tenantSlug={tenantSlug} role={role} onNavigate={() => setOpen(false)} />
      </DialogContent>
    </Dialog>
  );
}
