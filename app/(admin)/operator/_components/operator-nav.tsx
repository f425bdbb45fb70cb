"use client";

import { Building2, Flame, ScrollText, ShieldCheck } from "lucide-react";
import { SideNav, type SideNavItem } from "@/app/_components/ui/side-nav";

const SECTIONS: readonly SideNavItem[] = [
  {
    href: "/operator",
    label: "Tenants",
    icon: Building2,
    // A tenant's own page belongs to the tenants section.
    isCurrent: (pathname) => pathname === "/operator" || pathname.startsWith("/operator/tenants"),
  },
  {
    href: "/operator/operators",
    label: "Operators",
    icon: ShieldCheck,
    isCurrent: (pathname) => pathname.startsWith("/operator/operators"),
  },
  {
    href: "/operator/pools",
    label: "Warm pools",
    icon: Flame,
    isCurrent: (pathname) => pathname.startsWith("/operator/pools"),
  },
  {
    href: "/operator/audit",
    label: "Operator audit",
    icon: ScrollText,
    isCurrent: (pathname) => pathname.startsWith("/operator/audit"),
  },
];

export function OperatorNav() {
  return <SideNav label="Operator" items={SECTIONS} />;
}
