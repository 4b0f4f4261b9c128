/* SPDX-License-Identifier: Apache-2.0 */
/* The registry's look at a plugin file before dlopen: the loader maps a
 * truncated shared object and then faults (SIGBUS) reading past its end, so
 * a half-copied file in a plugin folder would kill every process that scans
 * it. Only what the loader will touch is checked: the ELF header, the program
 * headers and every segment's bytes, and the section header table. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfcheck.h"

#if UINTPTR_MAX == 0xffffffffffffffffu
typedef Elf64_Ehdr ehdr_t;
typedef Elf64_Phdr phdr_t;
typedef Elf64_Shdr shdr_t;
#define NATIVE_CLASS ELFCLASS64
#else
typedef Elf32_Ehdr ehdr_t;
typedef Elf32_Phdr phdr_t;
typedef Elf32_Shdr shdr_t;
#define NATIVE_CLASS ELFCLASS32
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_DATA ELFDATA2LSB
#else
#define NATIVE_DATA ELFDATA2MSB
#endif

/* e_machine of this process: the one a plugin must match. 0 if unknown. */
static unsigned native_machine(void)
{
	static unsigned m;
	if (m)
		return m;
	ehdr_t e;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && pread(fd, &e, sizeof(e), 0) == (ssize_t)sizeof(e) && memcmp(e.e_ident, ELFMAG, SELFMAG) == 0)
		m = e.e_machine;
	if (fd >= 0)
		close(fd);
	return m;
}

/* [off, off + len) within size, without overflow. */
static int within(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

int weft__elf_check(const char *path, char *why, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, len, "cannot be read: %s", strerror(errno));
		return -errno;
	}
	struct stat st;
	ehdr_t e;
	int rc = -ENOEXEC;
	if (fstat(fd, &st) != 0) {
		snprintf(why, len, "cannot be read: %s", strerror(errno));
		rc = -errno;
		goto out;
	}
	uint64_t size = (uint64_t)st.st_size;
	if (size < sizeof(e) || pread(fd, &e, sizeof(e), 0) != (ssize_t)sizeof(e)) {
		snprintf(why, len, "is truncated or no ELF file: %llu bytes, fewer than an ELF header's %zu",
			 (unsigned long long)size, sizeof(e));
		goto out;
	}
	if (memcmp(e.e_ident, ELFMAG, SELFMAG) != 0) {
		snprintf(why, len, "is no ELF file (it does not start with \\177ELF)");
		goto out;
	}
	if (e.e_ident[EI_CLASS] != NATIVE_CLASS || e.e_ident[EI_DATA] != NATIVE_DATA) {
		snprintf(why, len,
			 "is an ELF file of another class or byte order (%d-bit %s-endian) than this machine's",
			 e.e_ident[EI_CLASS] == ELFCLASS64 ? 64 : 32,
			 e.e_ident[EI_DATA] == ELFDATA2MSB ? "big" : "little");
		goto out;
	}
	unsigned m = native_machine();
	if (m && e.e_machine != m) {
		snprintf(why, len, "is built for another machine (ELF e_machine %u, this machine's is %u)",
			 (unsigned)e.e_machine, m);
		goto out;
	}
	if (e.e_type != ET_DYN) {
		snprintf(why, len, "is no shared object (ELF type %u)", (unsigned)e.e_type);
		goto out;
	}
	if (e.e_phnum == 0 || e.e_phentsize != sizeof(phdr_t)) {
		snprintf(why, len, "has no usable program headers (%u of %u bytes each)", (unsigned)e.e_phnum,
			 (unsigned)e.e_phentsize);
		goto out;
	}
	uint64_t phsize = (uint64_t)e.e_phnum * sizeof(phdr_t);
	if (!within(e.e_phoff, phsize, size)) {
		snprintf(why, len, "is truncated: its program headers end at byte %llu, past its %llu bytes",
			 (unsigned long long)(e.e_phoff + phsize), (unsigned long long)size);
		goto out;
	}
	for (unsigned i = 0; i < e.e_phnum; i++) {
		phdr_t p;
		if (pread(fd, &p, sizeof(p), (off_t)(e.e_phoff + (uint64_t)i * sizeof(p))) != (ssize_t)sizeof(p)) {
			snprintf(why, len, "cannot be read: program header %u", i);
			goto out;
		}
		if (p.p_filesz && !within(p.p_offset, p.p_filesz, size)) {
			snprintf(why, len, "is truncated: segment %u ends at byte %llu, past its %llu bytes", i,
				 (unsigned long long)p.p_offset + (unsigned long long)p.p_filesz,
				 (unsigned long long)size);
			goto out;
		}
	}
	if (e.e_shnum && e.e_shentsize != sizeof(shdr_t)) {
		snprintf(why, len, "has section headers of %u bytes, not %zu", (unsigned)e.e_shentsize, sizeof(shdr_t));
		goto out;
	}
	uint64_t shsize = (uint64_t)e.e_shnum * sizeof(shdr_t);
	if ((e.e_shoff || e.e_shnum) && !within(e.e_shoff, shsize, size)) {
		snprintf(why, len, "is truncated: its section header table ends at byte %llu, past its %llu bytes",
			 (unsigned long long)e.e_shoff + (unsigned long long)shsize, (unsigned long long)size);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}
