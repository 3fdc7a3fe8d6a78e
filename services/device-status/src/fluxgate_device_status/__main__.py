from fluxgate_device_status.app import main

main()
