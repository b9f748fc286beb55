# install.mk — make install (the libraries, the public headers, weftrun and a
# pkg-config file) and the generated knob reference docs/env.md.
.PHONY: install docs check-docs

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(LIB_WEFT) $(LIB_NCCL) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libnccl.so.2 $(DESTDIR)$(PREFIX)/lib/libnccl.so
	install -m 644 include/nccl.h include/nccl_device.h include/weft.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/bin/weftrun $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' weft.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/weft.pc

docs: $(BUILD)/bin/weft-env
	$(BUILD)/bin/weft-env --markdown > docs/env.md

check-docs: $(BUILD)/bin/weft-env
	@$(BUILD)/bin/weft-env --markdown | diff -u docs/env.md - && echo "docs/env.md is current"
