"""Device status: a faust-streaming table of devices, their ONLINE/OFFLINE transitions, HTTP views."""
