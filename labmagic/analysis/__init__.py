"""What the compiler made of a kernel, without a GPU: the SASS and its instruction mix (:mod:`.sass`) and the
compile panel's data (:mod:`.panel`), which adds theoretical occupancy (:mod:`labmagic.occupancy`) and a diff
against another kernel. Rendering is :mod:`labmagic.display.panel_view`."""
