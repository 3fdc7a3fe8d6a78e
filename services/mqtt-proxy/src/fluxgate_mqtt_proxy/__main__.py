from fluxgate_mqtt_proxy.app import main

raise SystemExit(main())
