/* SPDX-License-Identifier: Apache-2.0 */
/* ib plugin: discovery. Lists the verbs devices, keeps the active ports the
 * `devices` parameter selects, learns each port's speed, NUMA node and PCI
 * path from sysfs, and picks the GID it addresses peers with. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp.h"

#define SYSFS_IB "/sys/class/infiniband"

const char *ibp_link_name(uint8_t link_layer)
{
	switch (link_layer) {
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET:
		return "Ethernet";
	default:
		return "unspecified";
	}
}

int ibp_mtu_bytes(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256:
		return 256;
	case IBV_MTU_512:
		return 512;
	case IBV_MTU_1024:
		return 1024;
	case IBV_MTU_2048:
		return 2048;
	case IBV_MTU_4096:
		return 4096;
	default:
		return 0;
	}
}

static const char *port_state_name(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_NOP:
		return "NOP";
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	default:
		return "unknown";
	}
}

/* Signalling rate per lane in Gb/s (the figures the IB specification and
 * ibv_devinfo name: EDR 25, HDR 50, NDR 100), times the lane count. */
double ibp_port_gbytes(const struct ibv_port_attr *a)
{
	double lane, lanes;
	switch (a->active_speed) {
	case 1:
		lane = 2.5;
		break; /* SDR */
	case 2:
		lane = 5.0;
		break; /* DDR */
	case 4:
	case 8:
		lane = 10.0;
		break; /* QDR, FDR10 */
	case 16:
		lane = 14.0;
		break; /* FDR */
	case 32:
		lane = 25.0;
		break; /* EDR */
	case 64:
		lane = 50.0;
		break; /* HDR */
	case 128:
		lane = 100.0;
		break; /* NDR */
	default:
		return 0.0;
	}
	switch (a->active_width) {
	case 1:
		lanes = 1;
		break;
	case 2:
		lanes = 4;
		break;
	case 4:
		lanes = 8;
		break;
	case 8:
		lanes = 12;
		break;
	case 16:
		lanes = 2;
		break;
	default:
		return 0.0;
	}
	return lane * lanes / 8.0;
}

int ibp_parse_devices(const char *spec, struct ibp_dev_sel *sel, int *n)
{
	int count = 0;
	const char *p = spec ? spec : "";
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		if (!*p)
			break;
		size_t len = strcspn(p, ",");
		while (len > 0 && p[len - 1] == ' ')
			len--;
		char item[IBV_SYSFS_NAME_MAX + 16];
		if (len >= sizeof(item)) {
			IBP_ERR("parameter ib.devices: entry '%.*s' is too long", (int)len, p);
			return -WEFT_ERR_CONFIG;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		p += len;
		while (*p == ' ')
			p++;
		if (count == IBP_MAX_SEL) {
			IBP_ERR("parameter ib.devices: more than %d entries", IBP_MAX_SEL);
			return -WEFT_ERR_CONFIG;
		}
		struct ibp_dev_sel *s = &sel[count];
		char *colon = strchr(item, ':');
		s->port = 0;
		if (colon) {
			char *end;
			*colon = '\0';
			errno = 0;
			long port = strtol(colon + 1, &end, 10);
			if (colon[1] == '\0' || *end != '\0' || errno || port < 1 || port > 255) {
				IBP_ERR("parameter ib.devices: '%s:%s' has no port number 1..255 after the colon "
					"(write mlx5_0:1, or mlx5_0 for every port)",
					item, colon + 1);
				return -WEFT_ERR_CONFIG;
			}
			s->port = (int)port;
		}
		size_t nl = strlen(item);
		if (nl == 0 || nl >= sizeof(s->name)) {
			IBP_ERR("parameter ib.devices: entry '%s' has no device name", item);
			return -WEFT_ERR_CONFIG;
		}
		for (size_t i = 0; i < nl; i++) {
			char c = item[i];
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
			      c == '-' || c == '.')) {
				IBP_ERR("parameter ib.devices: '%s' is no device name (ibv_devices lists them)", item);
				return -WEFT_ERR_CONFIG;
			}
		}
		strcpy(s->name, item);
		count++;
	}
	*n = count;
	return 0;
}

static bool gid_is_zero(const union ibv_gid *g)
{
	for (int i = 0; i < 16; i++)
		if (g->raw[i])
			return false;
	return true;
}

static bool gid_is_v4_mapped(const union ibv_gid *g)
{
	for (int i = 0; i < 10; i++)
		if (g->raw[i])
			return false;
	return g->raw[10] == 0xff && g->raw[11] == 0xff;
}

static bool gid_is_link_local(const union ibv_gid *g)
{
	return g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80;
}

/* The kernel's name of a GID entry's type: "RoCE v2", "IB/RoCE v1", or ""
 * when sysfs does not say. */
static void gid_type(const struct ibp_fabric *fab, const struct ibp_port *p, int idx, char *out, size_t len)
{
	char path[256];
	snprintf(path, sizeof(path), SYSFS_IB "/%s/ports/%u/gid_attrs/types/%d", fab->devs[p->dev].name, p->num, idx);
	if (ibp_verbs->read_sysfs(path, out, len) != 0)
		out[0] = '\0';
}

int ibp_choose_gid(struct ibp_fabric *fab, struct ibp_port *p, int64_t forced)
{
	struct ibv_context *vctx = fab->devs[p->dev].vctx;
	union ibv_gid g;
	char type[16];
	int rc;
	p->gid_index = -1;
	memset(&p->gid, 0, sizeof(p->gid));
	p->gid_type[0] = '\0';
	if (forced >= 0) {
		if (forced >= p->attr.gid_tbl_len) {
			IBP_ERR("parameter ib.gid_index=%lld is outside %s's GID table (%d entries)", (long long)forced,
				p->name, p->attr.gid_tbl_len);
			return -WEFT_ERR_CONFIG;
		}
		if ((rc = ibp_verbs->query_gid(vctx, p->num, (int)forced, &g)) != 0)
			return ibp_verbs_fail("ibv_query_gid", p->name, rc);
		if (gid_is_zero(&g)) {
			IBP_ERR("parameter ib.gid_index=%lld names an empty GID entry of %s", (long long)forced, p->name);
			return -WEFT_ERR_CONFIG;
		}
		p->gid_index = (int)forced;
		p->gid = g;
		gid_type(fab, p, (int)forced, p->gid_type, sizeof(p->gid_type));
		return 0;
	}
	if (p->attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
		/* InfiniBand routes by LID; the port GID (index 0) is carried for
		 * peers that need a GRH (another subnet). */
		if (p->attr.gid_tbl_len > 0 && ibp_verbs->query_gid(vctx, p->num, 0, &g) == 0 && !gid_is_zero(&g)) {
			p->gid_index = 0;
			p->gid = g;
		}
		return 0;
	}
	int best = -1, best_score = 0;
	for (int i = 0; i < p->attr.gid_tbl_len; i++) {
		if (ibp_verbs->query_gid(vctx, p->num, i, &g) != 0 || gid_is_zero(&g))
			continue;
		gid_type(fab, p, i, type, sizeof(type));
		bool v2 = strcmp(type, "RoCE v2") == 0;
		int score;
		if (v2 && gid_is_v4_mapped(&g))
			score = 4;
		else if (v2 && !gid_is_link_local(&g))
			score = 3;
		else if (v2)
			score = 2;
		else
			score = 1;
		if (score > best_score) {
			best_score = score;
			best = i;
			p->gid = g;
			snprintf(p->gid_type, sizeof(p->gid_type), "%s", type);
		}
	}
	if (best < 0) {
		IBP_WARN("%s: Ethernet (RoCE) port without a usable GID (no IP address on its interface?): skipped",
			 p->name);
		return -WEFT_ERR_NO_DEVICE;
	}
	p->gid_index = best;
	return 0;
}

/* NUMA node and PCI path from sysfs; unknown stays -1 / "". */
static void port_location(struct ibp_fabric *fab, struct ibp_port *p)
{
	char path[256], buf[512];
	const char *dev = fab->devs[p->dev].name;
	p->numa_node = -1;
	p->pci_path[0] = '\0';
	snprintf(path, sizeof(path), SYSFS_IB "/%s/device/numa_node", dev);
	if (ibp_verbs->read_sysfs(path, buf, sizeof(buf)) == 0) {
		char *end;
		long v = strtol(buf, &end, 10);
		if (end != buf && *end == '\0' && v >= 0 && v < 4096)
			p->numa_node = (int)v;
	}
	snprintf(path, sizeof(path), SYSFS_IB "/%s/device", dev);
	if (ibp_verbs->real_path(path, buf, sizeof(buf)) == 0) {
		/* "/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0": the whole chain
		 * when it fits (topology compares chains), else the device's address. */
		const char *rel = buf;
		if (strncmp(rel, "/sys/devices/", 13) == 0)
			rel += 13;
		if (strlen(rel) >= sizeof(p->pci_path)) {
			const char *slash = strrchr(rel, '/');
			rel = slash ? slash + 1 : rel;
		}
		size_t n = strlen(rel);
		if (n >= sizeof(p->pci_path))
			n = sizeof(p->pci_path) - 1;
		memcpy(p->pci_path, rel, n);
		p->pci_path[n] = '\0';
	}
}

static bool selected(const struct ibp_dev_sel *sel, int nsel, const char *name, int port, bool *hit)
{
	if (nsel == 0)
		return true;
	bool any = false;
	for (int i = 0; i < nsel; i++) {
		if (strcmp(sel[i].name, name) == 0 && (port == 0 || sel[i].port == 0 || sel[i].port == port)) {
			any = true;
			if (hit && port != 0)
				hit[i] = true;
		}
	}
	return any;
}

void ibp_fabric_close(struct ibp_fabric *fab)
{
	if (!fab)
		return;
	for (int i = 0; i < fab->ndevs; i++) {
		struct ibp_dev *d = &fab->devs[i];
		int rc;
		if (d->pd && (rc = ibp_verbs->dealloc_pd(d->pd)) != 0)
			ibp_verbs_fail("ibv_dealloc_pd", d->name, rc);
		if (d->vctx && (rc = ibp_verbs->close_device(d->vctx)) != 0)
			ibp_verbs_fail("ibv_close_device", d->name, rc);
	}
	memset(fab, 0, sizeof(*fab));
}

int ibp_fabric_open(struct ibp_fabric *fab, const struct ibp_settings *s)
{
	struct ibp_dev_sel sel[IBP_MAX_SEL];
	bool hit[IBP_MAX_SEL] = {false};
	int nsel = 0, num = 0, rc;
	memset(fab, 0, sizeof(*fab));
	if ((rc = ibp_parse_devices(s->devices, sel, &nsel)) < 0)
		return rc;
	errno = 0;
	struct ibv_device **list = ibp_verbs->get_device_list(&num);
	if (!list) {
		/* No RDMA support in the kernel (ENOSYS) or no uverbs devices. */
		IBP_DBG("ibv_get_device_list: %s", strerror(errno ? errno : ENODEV));
		return 0;
	}
	fab->ndevices_found = num;
	for (int i = 0; i < num && list[i]; i++) {
		const char *name = list[i]->name;
		if (!selected(sel, nsel, name, 0, NULL)) {
			IBP_DBG("%s: not named by ib.devices; skipped", name);
			continue;
		}
		if (fab->ndevs == IBP_MAX_DEVS) {
			IBP_WARN("more than %d RDMA devices: %s and later ones are not used", IBP_MAX_DEVS, name);
			break;
		}
		struct ibp_dev *d = &fab->devs[fab->ndevs];
		memset(d, 0, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", name);
		errno = 0;
		d->vctx = ibp_verbs->open_device(list[i]);
		if (!d->vctx) {
			ibp_verbs_fail("ibv_open_device", name, errno);
			continue;
		}
		if ((rc = ibp_verbs->query_device(d->vctx, &d->attr)) != 0) {
			ibp_verbs_fail("ibv_query_device", name, rc);
			ibp_verbs->close_device(d->vctx);
			continue;
		}
		int before = fab->nports;
		for (int pn = 1; pn <= d->attr.phys_port_cnt && pn <= 255; pn++) {
			if (!selected(sel, nsel, name, pn, hit))
				continue;
			if (fab->nports == IBP_MAX_PORTS) {
				IBP_WARN("more than %d active ports: %s:%d and later ones are not used", IBP_MAX_PORTS, name,
					 pn);
				break;
			}
			struct ibp_port *p = &fab->ports[fab->nports];
			memset(p, 0, sizeof(*p));
			p->dev = fab->ndevs;
			p->num = (uint8_t)pn;
			snprintf(p->name, sizeof(p->name), "%s:%d", name, pn);
			if ((rc = ibp_verbs->query_port(d->vctx, p->num, &p->attr)) != 0) {
				ibp_verbs_fail("ibv_query_port", p->name, rc);
				continue;
			}
			if (p->attr.state != IBV_PORT_ACTIVE) {
				IBP_INFO("%s is %s, not ACTIVE: skipped", p->name, port_state_name(p->attr.state));
				fab->nports_down++;
				continue;
			}
			p->gbytes = ibp_port_gbytes(&p->attr);
			port_location(fab, p);
			rc = ibp_choose_gid(fab, p, s->gid_index);
			if (rc == -WEFT_ERR_NO_DEVICE)
				continue;
			if (rc < 0) {
				fab->ndevs++;
				ibp_verbs->free_device_list(list);
				ibp_fabric_close(fab);
				return rc;
			}
			IBP_DBG("%s: %s, %.1f GB/s, mtu %d, lid %u, gid index %d%s%s%s, numa %d, pci %s", p->name,
				ibp_link_name(p->attr.link_layer), p->gbytes, ibp_mtu_bytes(p->attr.active_mtu),
				p->attr.lid, p->gid_index, p->gid_type[0] ? " (" : "", p->gid_type,
				p->gid_type[0] ? ")" : "", p->numa_node, p->pci_path[0] ? p->pci_path : "?");
			fab->nports++;
		}
		if (fab->nports == before) {
			if ((rc = ibp_verbs->close_device(d->vctx)) != 0)
				ibp_verbs_fail("ibv_close_device", name, rc);
			memset(d, 0, sizeof(*d));
			continue;
		}
		fab->ndevs++;
	}
	/* An entry that matched no port of any listed device is a typo or a
	 * missing card: say so rather than quietly use fewer NICs. */
	for (int i = 0; i < nsel; i++) {
		if (hit[i])
			continue;
		bool present = false;
		for (int k = 0; k < num && list[k]; k++)
			if (strcmp(list[k]->name, sel[i].name) == 0)
				present = true;
		if (!present)
			IBP_WARN("parameter ib.devices names '%s', which is not an RDMA device here", sel[i].name);
		else if (sel[i].port)
			IBP_WARN("parameter ib.devices names %s:%d, which is no port of that device", sel[i].name,
				 sel[i].port);
	}
	ibp_verbs->free_device_list(list);
	return 0;
}
